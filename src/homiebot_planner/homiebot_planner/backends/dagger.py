"""On-policy data collection (DAgger): the student plans, the re-planning expert says what it should have done.

`DaggerBackend` wraps the planner being trained (the student) and the oracle. At every step it asks both; it
returns the oracle's answer with probability `beta` and the student's otherwise (the run follows the mixture), and
writes one row per step: the student's exact messages (the same text observation it sees at run time), the oracle's
answer in the student's answer shape (`Subtask: [...]\\nModel: ...`), the student's own answer and which of the two
was executed. Rows go to `<rows_dir>/<episode>__<run token>.jsonl` (that name is each row's `run`), one file per run,
flushed per step (a crash keeps the steps before it); `homiebot data dagger` turns them into training rows.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from emmoe_core.robot.scene import SceneSnapshot

from homiebot_planner.backends.base import BackendError, EpisodeInfo, GenerationRequest, HistorySource, PlannerBackend
from homiebot_planner.parsing import parse_output

ROWS_SUFFIX = ".jsonl"


@dataclass(frozen=True)
class DaggerConfig:
    """Settings of on-policy collection.

    Attributes:
        rows_dir: folder the per-run row files are written to.
        beta: probability that a step executes the oracle's answer instead of the student's (0: pure on-policy).
        seed: seed of the per-step draws (each run draws from seed and its episode id, so runs are reproducible).
    """

    rows_dir: str
    beta: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.rows_dir:
            raise ValueError("dagger rows_dir must name a folder")
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"dagger beta must be in [0, 1], got {self.beta}")


class DaggerBackend(PlannerBackend):
    """The student's prompts with the oracle's answers (module docstring).

    Args:
        student: the planner being trained (its observation mode and system prompt are used).
        oracle: a backend that reads the scene (OracleBackend).
        config: where rows go, beta and the seed.
    """

    needs_scene = True
    needs_history = True

    def __init__(self, student: PlannerBackend, oracle: PlannerBackend, config: DaggerConfig) -> None:
        self.student = student
        self.oracle = oracle
        self.config = config
        self.name = f"dagger:{student.name}+{oracle.name}@beta{config.beta:g}"
        self.observation_mode = student.observation_mode
        self.default_in_context_example = student.default_in_context_example
        self.object_locations = student.object_locations
        self._rows: IO[str] | None = None
        self._episode = ""
        self._run = ""
        self._draws = random.Random(config.seed)
        self._history: HistorySource = lambda: ()  # until a planner attaches its memory: nothing executed yet

    def attach_history(self, source: HistorySource) -> None:
        """Number the rows by the executed steps of `source`, and give it to both backends."""
        self._history = source
        self.student.attach_history(source)
        self.oracle.attach_history(source)

    def attach_scene(self, source: Callable[[], SceneSnapshot]) -> None:
        """Give the oracle the scene."""
        self.oracle.attach_scene(source)

    def system_prompt(self, protocol_prompt: str) -> str | None:
        """The student's system turn (the rows record what the student is prompted with)."""
        return self.student.system_prompt(protocol_prompt)

    def start_episode(self, episode: EpisodeInfo) -> None:
        """Start both backends and open this run's row file.

        Raises:
            BackendError: when either backend cannot plan the episode or the file cannot be opened.
        """
        self.student.start_episode(episode)
        self.oracle.start_episode(episode)
        self._close_rows()
        token = uuid.uuid4().hex[:12]
        path = Path(self.config.rows_dir) / f"{episode.episode_id}__{token}{ROWS_SUFFIX}"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._rows = path.open("a", encoding="utf-8")
        except OSError as error:
            raise BackendError(f"dagger: cannot write {path}: {error}") from None
        self._episode = episode.episode_id
        self._run = path.name.removesuffix(ROWS_SUFFIX)
        self._draws = random.Random(f"{self.config.seed}:{episode.episode_id}:{token}")

    def generate(self, request: GenerationRequest) -> str:
        """Both answers; the oracle's with probability beta. Writes the step's row."""
        expert = self.oracle.generate(request)
        student = self.student.generate(request)
        executed_by = "oracle" if self._draws.random() < self.config.beta else "student"
        self._write_row(request, expert, student, executed_by)
        return expert if executed_by == "oracle" else student

    def _write_row(self, request: GenerationRequest, expert: str, student: str, executed_by: str) -> None:
        if self._rows is None:
            raise BackendError("dagger: start_episode must be called first")
        parsed = parse_output(expert)
        if parsed is None:
            raise BackendError(f"dagger: the oracle's answer does not parse: {expert!r}")
        row = {
            "episode_id": self._episode,
            "run": self._run,
            "step": len(self._history()) + 1,
            "messages": [{"role": message.role, "content": message.text} for message in request.messages],
            "answer": f"Subtask: {parsed.subtask}\nModel: {parsed.model or 'None'}",
            "student_answer": student,
            "executed_by": executed_by,
        }
        self._rows.write(json.dumps(row, ensure_ascii=False) + "\n")
        self._rows.flush()

    def _close_rows(self) -> None:
        if self._rows is not None:
            self._rows.close()
            self._rows = None

    def close(self) -> None:
        """Close the row file and both backends."""
        self._close_rows()
        self.student.close()
        self.oracle.close()
