"""On-policy collection without ROS: the DAgger backend's mixture and rows, and their aggregation into training data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from homiebot_planner.backends import BackendError, ChatMessage, EpisodeInfo, GenerationRequest
from homiebot_planner.backends.dagger import DaggerBackend, DaggerConfig
from homiebot_planner.backends.mock import MockBackend, MockConfig
from homiebot_planner.memory import ExecutedStep
from homiebot_planner.settings import PlannerParameters, build_settings
from homiebot_planner.training.dagger_rows import DaggerRowsError, pack_rows, read_rows, write_aggregate
from emmoe_core.protocol import SubtaskText

STUDENT = "Analysis:\nSubtask: [Go to, sofa]\nModel: NoMaD"
ORACLE = "Analysis: x\nSubtask: [Go to, fridge]\nModel: NoMaD"


def _backend(rows: Path, beta: float) -> DaggerBackend:
    student = MockBackend(MockConfig(outputs=(STUDENT,), observation_mode="text"))
    oracle = MockBackend(MockConfig(outputs=(ORACLE,)))
    return DaggerBackend(student, oracle, DaggerConfig(rows_dir=str(rows), beta=beta, seed=3))


def _step(backend: DaggerBackend, step: int) -> str:
    """The backend's answer at step `step`, the steps before it attached as the episode's history."""
    executed = tuple(ExecutedStep(SubtaskText("Go to", "sofa"), True, "None") for _ in range(step - 1))
    backend.attach_history(lambda: executed)
    prompt = ChatMessage("user", f"Visible objects:\nTask: t\nstep {step}")
    return backend.generate(GenerationRequest(messages=(prompt,)))


@pytest.mark.parametrize(("beta", "executed"), [(0.0, STUDENT), (1.0, ORACLE)])
def test_beta_decides_whose_answer_runs_and_every_step_keeps_the_oracle_answer(tmp_path: Path, beta: float,
                                                                             executed: str) -> None:
    backend = _backend(tmp_path / "rows", beta)
    assert backend.observation_mode == "text" and backend.needs_scene
    backend.start_episode(EpisodeInfo("12_v1", "t", task_id="12_v1"))
    assert [_step(backend, step) for step in (1, 2)] == [executed, executed]
    backend.close()
    (path,) = (tmp_path / "rows").glob("12_v1__*.jsonl")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert [row["step"] for row in rows] == [1, 2]
    assert rows[0]["messages"] == [{"role": "user", "content": "Visible objects:\nTask: t\nstep 1"}]
    assert rows[0]["answer"] == "Subtask: [Go to, fridge]\nModel: NoMaD"
    assert {row["executed_by"] for row in rows} == {"student" if beta == 0.0 else "oracle"}


def test_a_mixed_beta_draws_both_reproducibly_per_run(tmp_path: Path) -> None:
    backend = _backend(tmp_path / "rows", 0.5)
    backend.start_episode(EpisodeInfo("3", "t", task_id="3"))
    answers = [_step(backend, step) for step in range(1, 41)]
    assert 5 < answers.count(ORACLE) < 35


def test_rows_become_sft_records_last_sample_per_step_wins(tmp_path: Path) -> None:
    backend = _backend(tmp_path / "rows", 0.0)
    backend.start_episode(EpisodeInfo("12_v1", "t", task_id="12_v1"))
    _step(backend, 1)
    _step(backend, 1)  # the planner re-sampled step 1
    _step(backend, 2)
    backend.close()
    records, counts = read_rows([tmp_path / "rows"])
    assert (counts.runs, counts.rows, counts.student_agreed, counts.executed_by_oracle) == (1, 2, 0, 0)
    assert records[0]["task_id"] == "12_v1" and records[0]["step"] == 1
    assert records[0]["messages"][-1] == {"role": "assistant", "content": "Subtask: [Go to, fridge]\nModel: NoMaD"}
    assert "2 on-policy rows from 1 runs" in counts.summary()
    packed = tmp_path / "round.jsonl.gz"
    assert pack_rows([tmp_path / "rows"], packed) == 2
    assert read_rows([packed])[0] == records


def test_aggregation_adds_sft_datasets_and_rejects_bad_input(tmp_path: Path) -> None:
    import datasets

    backend = _backend(tmp_path / "rows", 0.0)
    backend.start_episode(EpisodeInfo("12", "t", task_id="12"))
    _step(backend, 1)
    backend.close()
    sft = tmp_path / "sft"
    datasets.Dataset.from_list([{"id": "1_1", "task_id": "1", "variant": 0, "step": 1, "messages": [
        {"role": "user", "content": "u"}, {"role": "assistant", "content": "Subtask: [End]\nModel: None"}]}]
    ).save_to_disk(str(sft))
    written, counts = write_aggregate([tmp_path / "rows"], [sft], tmp_path / "out")
    assert (written, counts.rows) == (2, 1)
    assert sorted(datasets.load_from_disk(str(tmp_path / "out"))["task_id"]) == ["1", "12"]
    assert write_aggregate([tmp_path / "rows"], [sft], tmp_path / "none", sft_fraction=0.0)[0] == 1
    with pytest.raises(DaggerRowsError, match="sft_fraction"):
        write_aggregate([tmp_path / "rows"], [sft], tmp_path / "none", sft_fraction=2.0)
    with pytest.raises(DaggerRowsError, match="no on-policy rows"):
        read_rows([tmp_path / "empty"])
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "x.jsonl").write_text('{"step": 1}\n', encoding="utf-8")
    with pytest.raises(DaggerRowsError, match="x.jsonl:1"):
        read_rows([tmp_path / "bad"])


def test_settings_wrap_the_student_only_with_a_rows_folder(tmp_path: Path) -> None:
    assert build_settings(PlannerParameters(backend="random")).dagger is None
    settings = build_settings(PlannerParameters(backend="random", dagger_rows_dir=str(tmp_path), dagger_beta=0.25,
                                                data_dir="data", oracle_reach_m=1.5))
    assert settings.dagger == DaggerConfig(rows_dir=str(tmp_path), beta=0.25, seed=0)
    assert settings.oracle.reach_m == 1.5 and settings.oracle.data_dir == "data"
    with pytest.raises(ValueError, match="beta"):
        build_settings(PlannerParameters(backend="random", dagger_rows_dir=str(tmp_path), dagger_beta=1.5))
    with pytest.raises(BackendError, match="start_episode"):
        _step(_backend(tmp_path / "rows", 0.0), 1)


def _row(step: int, feedback: str, answer: str, student: str) -> dict[str, object]:
    prompt = f"Task: t\nInventory: None\nHistorical Execution: None\nFeedback: {feedback}\nNow ..."
    return {"episode_id": "12", "run": "12__a", "step": step, "messages": [{"role": "user", "content": prompt}],
            "answer": answer, "student_answer": student, "executed_by": "student"}


def test_the_recovery_focus_keeps_failures_ends_and_agreements_only(tmp_path: Path) -> None:
    pick, go = "Subtask: [Pick, apple]\nModel: RT-1-X", "Analysis:\nSubtask: [Go to, sofa]\nModel: NoMaD"
    end = "Subtask: [End]\nModel: None"
    rows = [_row(1, "None", pick, go),  # another choice after a success: left out
            _row(2, "Unable to pick, the subtask is too difficult to perform", pick, go),  # after a failure
            _row(3, "None", pick, "Analysis:\n" + end),  # the student ended too early
            _row(4, "None", end, go),  # the oracle ends
            _row(5, "None", pick, "Analysis:\n" + pick)]  # the student agreed
    path = tmp_path / "round.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert [record["step"] for record in read_rows([path], "recovery")[0]] == [2, 3, 4, 5]
    assert read_rows([path])[1].rows == 5
    with pytest.raises(DaggerRowsError, match="focus"):
        read_rows([path], "some")
