"""`homiebot collect` without a stack: a recorded run becomes an official-layout task, and every step whose outcome
differs from its design is reported; `homiebot tasks build --variants` keeps test tasks out."""

from __future__ import annotations

import json

from pathlib import Path

import pytest
from emmoe_eval.dataset import read_info, read_task
from emmoe_eval.runs import Step, write_trajectory

from homiebot.cli import main
from homiebot.collect import CollectConfig, CollectError, compare, selected_tasks, write_collected

ROOT = Path(__file__).resolve().parents[3]
PIXEL = bytes.fromhex("89504e470d0a1a0a")  # any bytes: collect copies the images, it does not read them


def _recorded_run(run_dir: Path, task, wrong_step: int | None = None) -> None:
    """A run folder as the evaluator writes it, replaying the task's info.txt (one step's feedback changed)."""
    run_dir.mkdir(parents=True)
    steps, held = [], []
    for block in task.info.blocks:
        feedback = "Unable to pick, the target is far away" if block.index == wrong_step else block.feedback
        if block.succeeded and block.subtask.action == "Pick":
            held.append(block.subtask.target)
        steps.append(Step(step=block.index, action=block.subtask.action, target=block.subtask.target,
                          place=block.subtask.place, model=block.model, success=feedback == "None",
                          feedback=feedback, inventory=tuple(block.inventory.split()) if block.inventory != "None"
                          else (), visible={"front": (f"seen_before_{block.index}",)},
                          locations={"front": (f"on table_{block.index}",)}))
        for view in ("front", "left", "back", "right"):
            (run_dir / f"subtask{block.index}_{view}.png").write_bytes(PIXEL)
    write_trajectory(run_dir / "trajectory.jsonl", steps)


def test_a_run_as_designed_is_written_in_the_official_layout(tmp_path):
    task = read_task(ROOT / "data" / "test" / "100", "test")
    _recorded_run(tmp_path / "runs" / "100" / "1", task)
    differences = write_collected(task, tmp_path / "runs" / "100" / "1", tmp_path / "out")
    assert differences == []
    written = tmp_path / "out" / "test" / "100"
    assert read_info(written / "info.txt") == task.info
    assert (written / "keypath.json").read_text() == (task.directory / "keypath.json").read_text()
    assert len(list(written.glob("subtask*_*.png"))) == 4 * len(task.info.blocks)
    visible = json.loads((written / "visible.json").read_text())
    assert visible == {str(block.index): {"front": [f"seen_before_{block.index}"]} for block in task.info.blocks}
    locations = json.loads((written / "locations.json").read_text())
    assert locations == {str(block.index): {"front": [f"on table_{block.index}"]} for block in task.info.blocks}


def test_a_step_that_differs_from_its_design_is_reported(tmp_path):
    task = read_task(ROOT / "data" / "test" / "100", "test")
    _recorded_run(tmp_path / "run", task, wrong_step=2)
    differences = write_collected(task, tmp_path / "run", tmp_path / "out")
    assert [(item.task_id, item.index) for item in differences] == [("100", 2)]
    assert "far away" in differences[0].got
    assert read_info(tmp_path / "out" / "test" / "100" / "info.txt").blocks[1].feedback == \
        "Unable to pick, the target is far away"
    missing = compare("100", task.info, [])
    assert len(missing) == len(task.info.blocks) and missing[0].got == "not executed"


def test_selection_and_settings_are_checked():
    assert sorted(selected_tasks(CollectConfig(tasks="test")), key=int) == [str(i) for i in range(91, 101)]
    with pytest.raises(CollectError, match="unknown task id"):
        selected_tasks(CollectConfig(tasks="91,nine"))
    with pytest.raises(ValueError, match="--out must differ from --data"):
        CollectConfig(out=Path("data"))


def test_build_variants_from_the_command_line_never_touches_test_tasks(tmp_path, capsys):
    assert main(["tasks", "build", "--data", str(tmp_path), "--tasks", "91,4", "--variants", "1"]) == 2
    assert "test tasks never get variants" in capsys.readouterr().err
    assert main(["tasks", "build", "--data", str(tmp_path), "--split", "train", "--tasks", "4", "--variants", "2",
                 "--seed", "5"]) == 0
    assert sorted(path.name for path in (tmp_path / "train").iterdir()) == ["4", "4_v1", "4_v2"]
    assert not (tmp_path / "test").exists()


def test_checked_variants_replay_each_draw_and_redraw_one_that_differs(tmp_path, capsys):
    # Seed 5's first draw of task 1's variant 1 leaves the fridge within the D1 distance of the robot's start, so the
    # designed D1 of its first step ([Open, fridge] from too far away) does not happen: the check replays the draw,
    # rejects it and draws again.
    assert main(["tasks", "build", "--data", str(tmp_path), "--split", "train", "--tasks", "1", "--variants", "1",
                 "--seed", "5", "--check-variants", "--redraws", "1"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "variant draw" in line]
    assert lines[0].startswith("task 1 variant draw: ") and "differ, drawn again: step 1 [Open, fridge]" in lines[0]
    assert len(lines) == 2
    written = (tmp_path / "train" / "1_v1").is_dir()
    assert written == lines[1].endswith("as designed")


def test_the_replay_expert_answers_every_block_in_order_failures_included():
    from homiebot_planner.backends.base import EpisodeInfo
    from homiebot_planner.backends.expert import ExpertBackend, ExpertConfig
    from homiebot_planner.memory import ExecutedStep

    task = read_task(ROOT / "data" / "test" / "100", "test")
    expert = ExpertBackend(ExpertConfig(source="replay"))
    expert.start_episode(EpisodeInfo("e", task.instruction, "100", task.directory))
    executed: list[ExecutedStep] = []
    for block in task.info.blocks:
        node = expert.next_node(executed)
        assert (str(node.subtask), node.analysis) == (str(block.subtask), block.analysis)
        executed.append(ExecutedStep(node.subtask, block.succeeded, block.feedback))
    assert str(expert.next_node(executed).subtask) == "[End]"


def test_on_policy_collection_runs_the_student_on_train_tasks_with_the_oracle(tmp_path, monkeypatch):
    """`collect --dagger` hands the runner the student, the rows folder, beta and the selection without the held-out
    tasks; a test task is refused before anything runs."""
    import homiebot.runner as runner
    from homiebot.collect import DaggerCollectConfig, collect_dagger

    seen = []
    monkeypatch.setattr(runner, "run_benchmark", lambda config, **_: seen.append(config))
    config = DaggerCollectConfig(out=tmp_path, tasks="1,2,3", data_dir=ROOT / "data", beta=0.25, seed=4,
                                 exclude=("2",), conditions="paper", model="adapter")
    assert collect_dagger(config, report=lambda _: None) == ["1", "3"]
    (run,) = seen
    assert (run.tasks, run.planner, run.model, run.runs, run.conditions) == ("1,3", "homiebot", "adapter", 1, "paper")
    assert f"planner.dagger_rows_dir={(tmp_path / 'rows').resolve()}" in run.overrides
    assert {"planner.dagger_beta=0.25", "planner.dagger_seed=4"} <= set(run.overrides)
    with pytest.raises(CollectError, match="test split"):
        collect_dagger(DaggerCollectConfig(out=tmp_path, tasks="1,91", data_dir=ROOT / "data"))
    with pytest.raises(ValueError, match="beta"):
        DaggerCollectConfig(out=tmp_path, beta=2.0)
