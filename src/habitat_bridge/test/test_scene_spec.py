"""Scene-spec schema: round trips, validation messages that name the field, the official scene.json form."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from habitat_bridge.official import is_official_scene, parse_official_episode, receptacle_canonical
from habitat_bridge.scene_spec import (
    SCHEMA,
    SceneSpec,
    SceneSpecError,
    load_scene_spec,
    save_scene_spec,
    spec_from_text,
)


def test_json_and_yaml_round_trips_keep_the_scene(compact_spec: SceneSpec, tmp_path: Path) -> None:
    for name in ("scene.json", "scene.yaml"):
        path = save_scene_spec(compact_spec, tmp_path / name)
        assert load_scene_spec(path) == compact_spec
    data = json.loads((tmp_path / "scene.json").read_text())
    assert data["schema"] == SCHEMA and data["version"] == 1


def test_objects_may_omit_shape_size_color_and_mass_of_known_ycb_objects(compact_spec: SceneSpec) -> None:
    data = compact_spec.to_dict()
    for obj in data["objects"]:
        for key in ("shape", "size", "color", "mass"):
            del obj[key]
    assert SceneSpec.from_dict(data).objects == compact_spec.objects


def _mutated(spec: SceneSpec, path: tuple, value: object) -> dict:
    data = copy.deepcopy(spec.to_dict())
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize(("path", "value", "expected"), [
    (("version",), 2, "version: this reader knows version 1"),
    (("schema",), "other", "schema: expected 'homiebot-scene'"),
    (("robot",), KeyError, "robot: missing"),
    (("furniture", 0, "size"), [1.0, 0.0, 2.0], "furniture[0].size: expected 3 positive numbers"),
    (("furniture", 0, "model"), "bed", "furniture[0].model: expected one of"),
    (("furniture", 1, "canonical"), "unicorn", "furniture[1].canonical: 'unicorn' is not in the alias table"),
    (("furniture", 0, "articulations", 0, "open_threshold"), 0.9,
     "furniture[0].articulations[0].open_threshold: 0.9 is outside the range"),
    (("furniture", 0, "articulations", 0, "joint"), "hinge",
     "furniture[0].articulations[0].joint: slot 'drawer_0' of a counter is a slide joint"),
    (("furniture", 0, "articulations", 0, "slot"), "drawer_9", "furniture[0].articulations[0].slot: model 'counter'"),
    (("furniture", 0, "colour"), [1, 1, 1], "furniture[0].colour: unknown field"),
    (("objects", 0, "receptacle"), "sofa_7", "objects[0].receptacle: no furniture or drawer named 'sofa_7'"),
    (("objects", 0, "surface"), "roof", "objects[0].surface: kitchen_counter_0 has no support region 'roof'"),
    (("objects", 0, "inside"), False, "objects[0].inside: region 'drawer_0' of kitchen_counter_0 is inside"),
    (("objects", 0, "offset"), [3.0, 0.0], "objects[0].offset: (3, 0) lies outside"),
    (("objects", 3, "name"), "apple_0", "objects[3].name: name 'apple_0' is used twice"),
    (("robot", "pose", "x"), 40.0, "robot.pose: (40, 2.3) is not inside any room"),
    (("rooms", 0, "bounds"), [0, 0, -1, 4], "rooms[0].bounds: expected [xmin, ymin, xmax, ymax] with max > min"),
])
def test_invalid_specs_name_the_field(compact_spec: SceneSpec, path: tuple, value: object, expected: str) -> None:
    assert compact_spec.objects[0].surface == "drawer_0"  # the fixture this table is written against
    with pytest.raises(SceneSpecError) as caught:
        SceneSpec.from_dict(_mutated(compact_spec, path, value))
    assert str(caught.value).startswith(expected), str(caught.value)


def test_an_object_too_tall_for_its_region_is_refused(compact_spec: SceneSpec) -> None:
    data = _mutated(compact_spec, ("objects", 0, "size"), [0.05, 0.05, 0.3])
    with pytest.raises(SceneSpecError, match=r"objects\[0\]\.size: 0.3 m tall does not fit under 0.13 m"):
        SceneSpec.from_dict(data)


def test_text_errors_name_the_source() -> None:
    with pytest.raises(SceneSpecError, match="^my.json: invalid JSON at line 1"):
        spec_from_text("{nope", "my.json")
    with pytest.raises(SceneSpecError, match="^my.yaml: name: missing"):
        spec_from_text("schema: homiebot-scene\nversion: 1\nrooms: []\nfurniture: []\nobjects: []\nrobot: {}\n",
                       "my.yaml")


def test_missing_file_is_reported_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(SceneSpecError, match="nothing.json: cannot read"):
        load_scene_spec(tmp_path / "nothing.json")


def test_official_episode_is_read_with_habitat_instance_names(official_scene_path: Path) -> None:
    data = json.loads(official_scene_path.read_text())
    assert is_official_scene(data)
    episode = parse_official_episode(data)
    assert episode.episode_id == "6386"
    assert episode.scene_id.endswith("v3_sc0_staging_07.scene_instance.json")
    assert len(episode.objects) == 30
    assert episode.objects[0].instance == "003_cracker_box_:0000"
    assert [obj.instance for obj in episode.target_objects] == list(episode.targets)
    assert episode.objects[6].instance == "003_cracker_box_:0001"  # the second cracker box of the file
    # y-up -> z-up: Habitat (x, y, z) = (0.78963, 0.52173, 0.49688) becomes (x, -z, y).
    assert episode.objects[0].position_zup == pytest.approx((0.78963, -0.49688, 0.52173))
    assert receptacle_canonical(episode.target_receptacles[0][0]) == "frl_apartment_chair_01"
    assert episode.markers[0]["params"]["link"] == "drawer1_top"


def test_official_episode_errors_name_the_field(official_scene_path: Path) -> None:
    data = json.loads(official_scene_path.read_text())
    data["episodes"][0]["rigid_objs"][3][1] = [[1, 2], [3, 4]]
    with pytest.raises(SceneSpecError, match=r"^episodes\[0\]\.rigid_objs\[3\]\[1\]: expected a 4x4 matrix"):
        parse_official_episode(data)


def test_the_readme_example_is_a_valid_spec() -> None:
    import re

    readme = Path(__file__).resolve().parents[1] / "README.md"
    example = re.search(r"```yaml\n(.*?)```", readme.read_text(), re.S)
    assert example is not None
    spec = spec_from_text(example.group(1), "README.md")
    assert [obj.receptacle for obj in spec.objects] == ["kitchen_drawer_0", "fridge_0"]
