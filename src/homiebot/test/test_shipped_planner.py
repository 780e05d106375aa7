"""HomieBot-135M as shipped: the committed adapter is small, loads offline on the embedded SmolLM2 base, is prompted
as it was trained, and plans a valid subtask on what the simulator shows at the start of a test task."""

from __future__ import annotations

import json
from pathlib import Path

from emmoe_eval.dataset import read_task
from emmoe_core.names import default_alias_table
from habitat_bridge.backends.mujoco_backend import MujocoBackend
from habitat_bridge.backends.mujoco_config import MujocoBackendConfig
from habitat_bridge.scene_spec import load_scene_spec
from homiebot_planner.backends.hf import adapter_stack
from homiebot_planner.backends.smollm2 import SmolLM2Backend, SmolLM2Config, default_adapter_dir
from homiebot_planner.planner import Observation, Planner
from homiebot_planner.prompts import VIEW_ORDER
from homiebot_planner.settings import PlannerParameters, build_settings

ROOT = Path(__file__).resolve().parents[3]
ADAPTER = ROOT / "models" / "homiebot-135m"
MAX_FILE_BYTES = 5_000_000


def test_the_shipped_stack_is_complete_and_every_file_is_under_5_mb() -> None:
    stage = {"adapter_config.json", "adapter_model.safetensors", "planner_prompt.json"}
    # v1: round 4's two stages (the top and recovery/) on v0.5's two SFT stages (v0.5/ on v0.5/sft/); relative bases,
    # so the checkout can live anywhere, and v0.5 stays loadable on its own (`--model models/homiebot-135m/v0.5`).
    stack = [ADAPTER / "v0.5" / "sft", ADAPTER / "v0.5", ADAPTER / "recovery", ADAPTER]
    assert {"README.md"} <= {path.name for path in ADAPTER.iterdir()} and (ADAPTER / "v0.5" / "README.md").is_file()
    assert all(path.stat().st_size < MAX_FILE_BYTES for path in ADAPTER.rglob("*") if path.is_file())
    for folder in stack:
        assert stage <= {path.name for path in folder.iterdir()}
        assert json.loads((folder / "planner_prompt.json").read_text()) == {
            "system_prompt": None, "answer_style": "decision", "object_locations": False}  # every stage: names only
    base, stages = adapter_stack(ADAPTER, base_model_path=str(ROOT))
    assert [folder.resolve() for folder in stages] == [folder.resolve() for folder in stack] and base == ROOT
    assert adapter_stack(ADAPTER / "v0.5", base_model_path=str(ROOT))[1] == stack[:2]
    assert default_adapter_dir().resolve() == ADAPTER.resolve()  # env.sh's HOMIEBOT_ROOT is this checkout


def _simulator_observation(task_id: str) -> Observation:
    """The names visible per view at the robot's start pose in the task's MuJoCo scene (as /sim/get_observation)."""
    backend = MujocoBackend(MujocoBackendConfig(image_width=96, image_height=96))
    try:
        backend.reset(load_scene_spec(ROOT / "data" / "test" / task_id / "scene.json"))
        seen = backend.observe(VIEW_ORDER, segmentation=True)
    finally:
        backend.close()
    canonical = dict(zip(seen.instance_names, seen.instance_canonicals))
    return Observation(visible={view: [canonical[name] for name in seen.visible[view]] for view in VIEW_ORDER})


def test_homiebot_plans_a_valid_subtask_on_a_simulator_observation() -> None:
    task = read_task(ROOT / "data" / "test" / "91", "test")
    observation = _simulator_observation("91")
    backend = SmolLM2Backend(SmolLM2Config(adapter_dir=str(ADAPTER)))
    config = build_settings(PlannerParameters()).planner  # the planner node's defaults for homiebot
    assert (config.temperature, config.target_names) == (0.0, "vocabulary")
    planner = Planner(backend, task.info.task, config)

    assert backend.name == "homiebot" and backend.observation_mode == "text"
    assert [message.role for message in planner.messages(observation, "u")] == ["user"]  # trained without a system turn
    decision = planner.decide(observation)
    assert decision.valid and not decision.gave_up and decision.samples == 1
    # A name the benchmark knows: in view, or out of view as the training answers name places (`fridge`).
    assert decision.subtask.action == "End" or default_alias_table().knows(decision.subtask.target)
    assert decision.raw_output.startswith("Analysis:\nSubtask: [")  # a decision-style answer, empty Analysis
