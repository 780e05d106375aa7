"""`homiebot sim render` and `homiebot sim view` (homiebot.commands.sim, a thin wrapper over habitat_bridge.tools)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from habitat_bridge.apartment import compact_room
from habitat_bridge.scene_spec import save_scene_spec
from PIL import Image

from homiebot.cli import main

OFFICIAL_SCENE = (Path(__file__).resolve().parents[2] / "habitat_bridge" / "test" / "data"
                  / "official_scene_example.json")


def test_render_writes_four_256_views_of_a_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scene = save_scene_spec(compact_room(0), tmp_path / "kitchen.json")
    assert main(["sim", "render", "--scene", str(scene), "--out", str(tmp_path / "views")]) == 0
    written = capsys.readouterr().out.split()
    assert [Path(path).name for path in written] == ["front.png", "left.png", "back.png", "right.png"]
    images = [np.asarray(Image.open(path)) for path in written]
    assert all(image.shape == (256, 256, 3) for image in images)
    assert len({image.tobytes() for image in images}) == 4  # four different directions


def test_render_a_task_with_third_person_views(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.tsv"
    tasks.write_text("id\tinstruction\n7\tput the bowl on the sofa\n")
    out = tmp_path / "task"
    assert main(["sim", "render", "--task", "7", "--tasks-file", str(tasks), "--out", str(out), "--third-person",
                 "--size", "64"]) == 0
    names = sorted(path.name for path in out.iterdir())
    assert names == sorted(["front.png", "left.png", "back.png", "right.png", "third_front.png", "third_left.png",
                            "third_back.png", "third_right.png"])
    assert Image.open(out / "third_back.png").size == (64, 64)


def test_view_draws_a_labelled_map(tmp_path: Path) -> None:
    out = tmp_path / "map.png"
    assert main(["sim", "view", "--seed", "2", "--out", str(out)]) == 0
    image = np.asarray(Image.open(out))
    assert image.shape[0] > 300 and image.shape[1] > 400
    assert main(["sim", "view", "--scene", str(OFFICIAL_SCENE), "--out", str(tmp_path / "official.png")]) == 0


def test_user_mistakes_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "render", "--scene", str(tmp_path / "missing.json"), "--out", str(tmp_path)]) == 2
    assert "missing.json: cannot read" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"schema": "homiebot-scene", "version": 1}))
    assert main(["sim", "view", "--scene", str(broken)]) == 2
    assert "broken.json: name: missing" in capsys.readouterr().err
    assert main(["sim", "view", "--scene", str(broken), "--task", "3"]) == 2
    assert "either --scene or --task" in capsys.readouterr().err
    tasks = tmp_path / "tasks.tsv"
    tasks.write_text("id\tinstruction\n1\tfind an apple\n")
    assert main(["sim", "view", "--task", "99", "--tasks-file", str(tasks)]) == 2
    assert "no task with id 99" in capsys.readouterr().err
