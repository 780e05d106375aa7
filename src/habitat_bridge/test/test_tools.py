"""Scene choice for the sim tools (habitat_bridge.tools) and the choice of the headless GL platform
(habitat_bridge.backends.gl_platform)."""

from __future__ import annotations

from pathlib import Path

from habitat_bridge import tools
from habitat_bridge.backends.gl_platform import configure_gl_platform


def test_task_instruction_lookup(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.tsv"
    tasks.write_text("id\tinstruction\n3\tfind a cold apple\n")
    assert tools.task_instruction(3, tasks) == "find a cold apple"
    spec = tools.choose_scene(tools.SceneChoice(task_id=3, tasks_file=str(tasks)))
    assert any(obj.canonical == "013_apple" and obj.receptacle.startswith("fridge") for obj in spec.objects)


def test_gl_platform_is_chosen_before_mujoco_loads() -> None:
    environ: dict[str, str] = {}
    assert configure_gl_platform(environ, probe=lambda: True) == "egl" and environ == {"MUJOCO_GL": "egl"}
    environ = {}
    assert configure_gl_platform(environ, probe=lambda: False) == "osmesa"
    assert environ == {"MUJOCO_GL": "osmesa", "PYOPENGL_PLATFORM": "osmesa"}

    def never_called() -> bool:
        raise AssertionError("the user's choice is not probed")

    environ = {"MUJOCO_GL": "osmesa"}
    assert configure_gl_platform(environ, probe=never_called) == "osmesa"
    assert environ["PYOPENGL_PLATFORM"] == "osmesa"
