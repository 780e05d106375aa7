"""What a benchmark run is told and what it counts, shared by the local runner (homiebot.runner) and the Ray
runner (homiebot.ray_runner): the configuration of `homiebot run`, its Ray options, the progress counts and the
runner's errors. Neither runner imports the other's module for these: the runner hands the Ray runner the function
that runs pairs on one stack (homiebot.ray_runner.run_on_ray).
"""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass, field
from pathlib import Path

from emmoe_core.ros_domains import DOMAIN_IDS
from emmoe_core.validation import require_positive

from homiebot.bringup import parse_overrides
from homiebot.conditions import DEFAULT_CONDITIONS, check_conditions
from homiebot.setting import DEFAULT_SETTING, perception_of

LOCAL = "local"  # the address of `--ray` without one: a private instance on this machine

PLANNERS = ("homiebot", "smollm2", "mock", "expert", "openai", "hf", "random", "oracle")


class RunnerError(RuntimeError):
    """The benchmark could not run (bad selection, stack failure); the message says why."""


class RunFilesUnwritable(RunnerError):
    """The evaluator could not write a run's files (disk full, folder removed): every later run would fail too."""

    def __init__(self, task_id: str, run_index: int, error_msg: str, out: Path) -> None:
        super().__init__(f"task {task_id} run {run_index}: {error_msg}; the benchmark stops here (an infrastructure "
                         f"failure, not scored; the runs finished before it are kept in {out}): free space or fix the "
                         "folder, then run the same command again to resume")
        self.fields = (task_id, run_index, error_msg, out)

    def __reduce__(self) -> tuple[type, tuple[str, int, str, Path]]:  # pickled back from a Ray worker
        return (type(self), self.fields)


@dataclass(frozen=True)
class RayOptions:
    """Where and how the runs go on Ray.

    Attributes:
        address: LOCAL (start a private instance on this machine), "auto" (the cluster `ray start` made on this
            machine, or RAY_ADDRESS), or a head's HOST:PORT.
        cpus_per_run: CPUs Ray reserves for each run's stack (simulator, skill servers, planner, evaluator).
        gpus_per_run: GPUs reserved for each run (an `hf` planner on a GPU node).
        shared_out: the experiment folder is on a file system every node mounts at the same path: the workers
            write the run folders there directly instead of sending the files back.
    """

    address: str = LOCAL
    cpus_per_run: float = 1.0
    gpus_per_run: float = 0.0
    shared_out: bool = False

    def __post_init__(self) -> None:
        if not self.address:
            raise ValueError("--ray needs an address: local, auto or HOST:PORT")
        require_positive("--ray-cpus-per-run", self.cpus_per_run)
        if self.gpus_per_run < 0:
            raise ValueError(f"--ray-gpus-per-run must be at least 0, got {self.gpus_per_run}")


@dataclass(frozen=True)
class RunnerConfig:
    """What `homiebot run` does.

    Attributes:
        tasks: "train", "test", "all" or comma-separated task ids ("91,93").
        runs: runs per task (the benchmark uses 3).
        planner: planner backend (see PLANNERS).
        setting, conditions, perception: background or no_background (homiebot.setting), reliable or paper
            (homiebot.conditions), learned or segmentation (None: the setting's default); all recorded in
            `<out>/setting.json`.
        out: experiment folder.
        data_dir: EMMOE data folder with train/ and test/.
        jobs: parallel stacks.
        max_steps: planner step limit per run.
        model: openai: model name; hf: local model path; homiebot: another adapter folder (default: the shipped one).
        base_url: openai: server URL.
        params_file: ROS parameter file of the stack.
        overrides: extra `NODE.PARAM=VALUE` parameters.
        run_timeout_s: longest a single run may take before it is cancelled.
        startup_timeout_s: longest a stack may take to come up.
        record_videos: the evaluator writes head-camera and third-person MP4s per subtask and per run.
        retries: how often a run that ended without a planner result (a node died, the planner server failed, a
            time-out) is run again at once; what still has none at the end is left for the next resume.
        domain_id: the ROS_DOMAIN_ID of the (single) stack; None: a free one is leased. Either way the domain is
            locked for the run, so no other stack on this machine can join it.
        ray: fan the runs out over a Ray cluster (homiebot.ray_runner) instead of `jobs` local stacks.
    """

    tasks: str
    out: Path
    runs: int = 3
    planner: str = "homiebot"
    setting: str = DEFAULT_SETTING
    conditions: str = DEFAULT_CONDITIONS
    perception: str | None = None
    data_dir: Path = Path("data")
    jobs: int = 1
    max_steps: int = 20
    model: str = ""
    base_url: str = ""
    params_file: Path | None = None
    overrides: tuple[str, ...] = ()
    run_timeout_s: float = 1800.0
    startup_timeout_s: float = 180.0
    record_videos: bool = True
    retries: int = 0
    domain_id: int | None = None
    ray: RayOptions | None = None

    def __post_init__(self) -> None:
        if self.ray is not None and (self.jobs != 1 or self.domain_id is not None):
            raise ValueError("--ray places the runs itself: it takes neither --jobs nor --domain-id")
        if self.domain_id is not None and (self.jobs != 1 or self.domain_id not in DOMAIN_IDS):
            raise ValueError(f"--domain-id needs --jobs 1 and an id in 1-101 or 215-232, got {self.domain_id} "
                             f"with --jobs {self.jobs}")
        if self.planner not in PLANNERS:
            raise ValueError(f"unknown planner {self.planner!r}; expected one of {', '.join(PLANNERS)}")
        perception_of(self.setting, self.perception)
        check_conditions(self.conditions)
        if self.retries < 0:
            raise ValueError("--retries must be 0 or more")
        if self.runs < 1 or self.jobs < 1 or self.max_steps < 1:
            raise ValueError("--runs, --jobs and --max-steps must be at least 1")
        if self.planner == "hf" and not self.model:
            raise ValueError("--planner hf needs --model PATH (a local model folder)")
        if self.planner == "openai" and not (self.model and self.base_url):
            raise ValueError("--planner openai needs --base-url URL and --model NAME (key from OPENAI_API_KEY)")
        try:
            parse_overrides(self.overrides)
        except ValueError as error:
            raise ValueError(f"--set: {error}") from error


@dataclass
class Progress:
    """Counts shared by the job threads; `attempts` counts the runs of each (task, run) pair so far."""

    total: int
    done: int = 0
    failed: list[str] = field(default_factory=list)
    attempts: dict[tuple[str, int], int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def retry(self, pair: tuple[str, int], retries: int, pairs: queue.Queue[tuple[str, int]]) -> bool:
        """Queue `pair` again when it has retries left (call with the lock held); returns whether it was."""
        attempts = self.attempts[pair] = self.attempts.get(pair, 0) + 1
        if attempts > retries:
            return False
        self.total += 1
        pairs.put(pair)
        return True
