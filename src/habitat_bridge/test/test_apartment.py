"""The apartment generator: furniture the tasks name, determinism, reachability, task and official scenes."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from habitat_bridge import apartment, layout, occupancy
from habitat_bridge.official import parse_official_episode
from habitat_bridge.scene_spec import SceneSpec

# Furniture the EMMOE tasks name (alias -> canonical entry) that every apartment must contain.
REQUIRED_FURNITURE = {
    "sofa": "frl_apartment_sofa", "brown table": "frl_apartment_table_01", "wood table": "frl_apartment_table_02",
    "white desk": "frl_apartment_table_03", "tv stand": "frl_apartment_tvstand", "tv": "frl_apartment_tv_screen",
    "chair": "frl_apartment_chair_01", "white shelf": "frl_apartment_wall_cabinet_01",
    "white cabinet": "frl_apartment_wall_cabinet_02", "kitchen counter": "kitchen_counter", "fridge": "fridge",
}


def test_apartment_has_the_furniture_rooms_and_containers_tasks_name(apartment_spec: SceneSpec) -> None:
    canonicals = {piece.canonical for piece in apartment_spec.furniture}
    assert set(REQUIRED_FURNITURE.values()) <= canonicals
    assert {room.kind for room in apartment_spec.rooms} == {"living_room", "kitchen", "dining_area"}
    counter = next(piece for piece in apartment_spec.furniture if piece.canonical == "kitchen_counter")
    assert counter.geometry.surface("sink") is not None
    drawers = [item for item in counter.articulations if item.joint == "slide"]
    assert len(drawers) >= 2 and all(item.open_threshold == 0.25 for item in drawers)
    fridge = next(piece for piece in apartment_spec.furniture if piece.canonical == "fridge")
    assert [(item.joint, item.open_threshold) for item in fridge.articulations] == [("hinge", 0.8)]
    assert 14 <= len(apartment_spec.objects) <= 20


def test_same_seed_same_apartment_other_seeds_differ() -> None:
    first, again = apartment.generate_apartment(4), apartment.generate_apartment(4)
    assert first.to_dict() == again.to_dict()
    layouts = {json.dumps(apartment.generate_apartment(seed).to_dict()["furniture"]) for seed in range(4)}
    assert len(layouts) == 4


@pytest.mark.parametrize("seed", range(6))
def test_every_object_is_reachable_from_the_start(seed: int) -> None:
    spec = apartment.generate_apartment(seed)
    assert occupancy.unreachable_objects(spec) == []
    for obj in spec.objects:
        x, y, z, _ = layout.object_start_pose(spec, obj)
        assert 0.1 < z < 1.4, f"{obj.name} at height {z:.2f} m"


def test_unreachable_objects_are_detected(compact_spec: SceneSpec) -> None:
    # An arm that reaches 5 cm finds nothing; one that reaches 1 m finds everything.
    assert sorted(occupancy.unreachable_objects(compact_spec, reach=0.05)) == sorted(
        obj.name for obj in compact_spec.objects)
    assert occupancy.unreachable_objects(compact_spec, reach=1.0) == []


def test_objects_on_a_region_do_not_overlap(apartment_spec: SceneSpec) -> None:
    by_region: dict[tuple[str, str], list] = {}
    for obj in apartment_spec.objects:
        by_region.setdefault((obj.receptacle, obj.surface), []).append(obj)
    for objects in by_region.values():
        for index, first in enumerate(objects):
            for second in objects[index + 1:]:
                assert math.dist(first.offset, second.offset) >= (layout.footprint_radius(first)
                                                                  + layout.footprint_radius(second))


@pytest.mark.parametrize(("instruction", "expected"), [
    ("put the green_can on the brown_table to the fridge", ("010_potted_meat_can", "frl_apartment_table_01", "")),
    ("fetch two cracker_boxes from the kitchen sink and refrigerate them", ("003_cracker_box", "kitchen_counter",
                                                                            "sink")),
    ("refrigerate all lemons in the kitchen drawer", ("014_lemon", "kitchen_counter", "drawer")),
    ("find a cold apple and put it on the kitchen_counter", ("013_apple", "fridge", "")),
])
def test_instructions_name_objects_and_where_they_are(instruction: str, expected: tuple[str, str, str]) -> None:
    requests = apartment.task_object_requests(instruction, random.Random(0))
    first = requests[0]
    assert (first.canonical, first.receptacle, first.region) == expected
    assert Counter(request.canonical for request in requests)[expected[0]] == 2


@pytest.mark.parametrize(("instruction", "receptacle"), [
    ("clean up the brown table and place all items in the fridge", "frl_apartment_table_01"),
    ("put all items on the sofa to the tvstand", "frl_apartment_sofa"),
    ("check if there is food on the sofa then put them in the fridge if so", "frl_apartment_sofa"),
])
def test_instructions_about_several_items_put_three_there(instruction: str, receptacle: str) -> None:
    requests = apartment.task_object_requests(instruction, random.Random(0))
    assert [request.receptacle for request in requests] == [receptacle] * 3  # never the destination


def test_task_scene_places_the_named_object_where_the_instruction_says() -> None:
    spec = apartment.scene_for_task(100, "put the green_can on the brown_table to the fridge")
    assert spec.name == "task_100"
    cans = [obj for obj in spec.objects if obj.canonical == "010_potted_meat_can"]
    assert any(obj.receptacle.startswith("brown_table") for obj in cans)
    drawer_task = apartment.scene_for_task(60, "refrigerate all lemons in the kitchen drawer")
    assert any(obj.canonical == "014_lemon" and obj.receptacle.startswith("kitchen_drawer") and obj.inside
               for obj in drawer_task.objects)


def test_official_episode_becomes_an_apartment_with_its_objects(official_scene_path: Path) -> None:
    episode = parse_official_episode(json.loads(official_scene_path.read_text()))
    spec = apartment.spec_from_official(episode)
    assert Counter(obj.canonical for obj in spec.objects) == Counter(obj.canonical for obj in episode.objects)
    # The first target's official receptacle is a chair: it starts on one of ours.
    cracker = next(obj for obj in spec.objects if obj.canonical == "003_cracker_box")
    assert cracker.receptacle.startswith("chair_")
    assert occupancy.unreachable_objects(spec) == []


def test_compact_room_is_small_and_complete(compact_spec: SceneSpec) -> None:
    assert len(compact_spec.rooms) == 1 and len(compact_spec.furniture) == 3
    assert {obj.receptacle for obj in compact_spec.objects} >= {"kitchen_drawer_0", "fridge_0"}
    assert occupancy.unreachable_objects(compact_spec) == []


def test_an_exact_request_for_a_place_too_small_is_refused_and_a_preference_yields() -> None:
    """A cracker box is taller than a shallow drawer: a task definition asking for it there is refused (no draw can
    help), a place read from an instruction's words yields to the other start places."""
    from habitat_bridge.placement import ObjectRequest, PlacementRefused

    exact = ObjectRequest("003_cracker_box", "kitchen_counter", "drawer")
    with pytest.raises(PlacementRefused, match="003_cracker_box is 0.2[0-9] m tall and kitchen_counter drawer has at "
                                               "most 0.13 m of room above its floor; deep_drawers: true"):
        apartment.generate_apartment(3, apartment.ApartmentConfig(required=(exact,)))
    spec = apartment.generate_apartment(3, apartment.ApartmentConfig(required=(replace(exact, exact=False),)))
    assert spec.objects[0].canonical == "003_cracker_box" and not spec.objects[0].receptacle.startswith("kitchen_drawer")
    deep = apartment.generate_apartment(3, apartment.ApartmentConfig(required=(exact,), deep_drawers=True))
    assert deep.objects[0].receptacle.startswith("kitchen_drawer")
