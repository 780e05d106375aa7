"""`homiebot run --ray` / `homiebot collect --ray`: the pending runs of an experiment fanned out over a Ray cluster.

Every pending (task, run) pair is one Ray task. Wherever Ray places it, the task leases a ROS_DOMAIN_ID that no
other stack on that node holds (emmoe_core.ros_domains: a lock file per id in the node's /tmp, so two stacks on one
node never share a domain), brings up one whole stack through the local runner that `runner.run_benchmark` hands it
(itself: every node process on loopback-only DDS, as locally), runs the episode and returns the run folder's files;
the driver writes them into the experiment folder, which is therefore laid out exactly like a local run's and
resumes the same way (finished runs are skipped). With `shared_out` the workers write into the experiment folder
themselves (a path that every node mounts). Ray runs a task again when its worker process or node is lost (up to
LOST_WORKER_RETRIES times, on whichever node has room); a run that ended without a planner result is run again up
to `--retries` times, as locally.

`--ray` without an address starts a private Ray instance on this machine and stops it at the end. A local instance,
and a driver that joins a cluster at a loopback address, keep every Ray server on 127.0.0.1: Ray binds its gRPC
servers to the node address, and only with multi-node mode off (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0) does it keep
127.0.0.1 as that address instead of replacing it with the machine's external one.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from homiebot.run_folders import SCORE_FILE, has_planner_result
from homiebot.run_config import LOCAL, Progress, RunFilesUnwritable, RunnerConfig, RunnerError

LOST_WORKER_RETRIES = 3  # Ray's own default for tasks whose worker died
_SCRATCH_PREFIX = "homiebot-ray-"
_LOOPBACK_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


class LocalRunner(Protocol):
    """Runs (task, run) pairs on stacks of this machine: `homiebot.runner.run_benchmark`, handed in by the runner so
    that this module does not import it back."""

    def __call__(self, config: RunnerConfig, report: Callable[[str], None],
                 on_progress: Callable[[Progress, str], None] | None, *,
                 work: Sequence[tuple[str, int]] | None) -> Progress: ...


class NodeNotReady(RunnerError):
    """A Ray node cannot run stacks (the project's environment is not set up there): every run would fail."""


@dataclass(frozen=True)
class RunOutcome:
    """What one Ray task sends back: the run folder's files (none with shared_out) and how the run went."""

    task_id: str
    run_index: int
    node: str
    origin: str
    has_result: bool
    files: dict[str, bytes] = field(default_factory=dict)
    summaries: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()


def homiebot_run(config: RunnerConfig, task_id: str, run_index: int, shared_out: bool,
                 run_locally: LocalRunner) -> RunOutcome:
    """The Ray task: one (task, run) pair on one fresh stack of the node it runs on (`config` has absolute paths)."""
    import ray

    node = f"{socket.gethostname()}/{ray.get_runtime_context().get_node_id()[:8]}"
    from emmoe_core.dds_guard import discovery_problem

    problem = discovery_problem()
    if problem is not None:
        raise NodeNotReady(f"Ray node {node} runs without the project's environment (start `ray start` there from a "
                           f"shell that sourced env.sh): {problem}")
    if not config.data_dir.is_dir():
        raise NodeNotReady(f"Ray node {node} has no data folder {config.data_dir}: every node needs the data (and "
                           "model files) at the driver's paths")
    _remove_stale_scratch()
    scratch = config.out if shared_out else Path(tempfile.mkdtemp(prefix=f"{_SCRATCH_PREFIX}{os.getpid()}-"))
    summaries: list[str] = []
    local = replace(config, out=scratch, tasks=task_id, jobs=1, retries=0, domain_id=None, ray=None)
    try:
        progress = run_locally(local, lambda _line: None, lambda _progress, summary: summaries.append(summary),
                               work=[(task_id, run_index)])
        run_dir = scratch / task_id / str(run_index)
        files = {} if shared_out else _read_folder(run_dir)
        return RunOutcome(task_id, run_index, node, str(run_dir), has_planner_result(run_dir / SCORE_FILE), files,
                          tuple(summaries), tuple(progress.failed))
    finally:
        if not shared_out:
            shutil.rmtree(scratch, ignore_errors=True)


def _read_folder(folder: Path) -> dict[str, bytes]:
    """Every file under `folder`, by its relative path."""
    if not folder.is_dir():
        return {}
    return {path.relative_to(folder).as_posix(): path.read_bytes() for path in sorted(folder.rglob("*"))
            if path.is_file()}


def _remove_stale_scratch() -> None:
    """Remove the scratch folders of Ray workers on this node that died (SIGKILL skips their clean-up)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_SCRATCH_PREFIX}*-*"):
        pid = folder.name[len(_SCRATCH_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(folder, ignore_errors=True)


def store_run(out: Path, task_id: str, run_index: int, files: dict[str, bytes], origin: str) -> None:
    """Write a run folder that came back from a worker into the experiment folder, whole or not at all: the files
    go to a hidden folder first, which then replaces the run's folder (an earlier failed attempt's included). The
    score's paths (run folder, trajectory, bag) are moved from the worker's folder `origin` to their place here.

    Raises:
        RunnerError: for a file name that would land outside the run folder.
    """
    final = out / task_id / str(run_index)
    staging = out / task_id / f".{run_index}.incoming"
    shutil.rmtree(staging, ignore_errors=True)
    for name, data in files.items():
        relative = Path(name)
        if relative.is_absolute() or ".." in relative.parts:
            raise RunnerError(f"task {task_id} run {run_index}: a worker sent the file name {name!r}")
        (staging / relative).parent.mkdir(parents=True, exist_ok=True)
        (staging / relative).write_bytes(_relocated_score(data, origin, final.resolve()) if name == SCORE_FILE
                                         else data)
    staging.mkdir(parents=True, exist_ok=True)
    if final.exists():
        shutil.rmtree(final)
    staging.rename(final)


def _relocated_score(data: bytes, origin: str, final: Path) -> bytes:
    """A score.json whose paths under `origin` now point under `final` (written as the evaluator writes it)."""
    score = json.loads(data)
    for key, value in score.items():
        if isinstance(value, str) and (value == origin or value.startswith(origin + "/")):
            score[key] = str(final) + value[len(origin):]
    return (json.dumps(score, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def portable(config: RunnerConfig) -> RunnerConfig:
    """`config` with absolute paths, as a worker on another node (another working folder) must see it."""
    model = config.model
    if config.planner in ("hf", "homiebot") and model:
        model = str(Path(model).resolve())
    return replace(config, data_dir=config.data_dir.resolve(), out=config.out.resolve(), model=model,
                   params_file=config.params_file.resolve() if config.params_file else None)


def connect(address: str) -> Any:
    """Start (LOCAL) or join a Ray cluster; returns the ray module."""
    if address == LOCAL or address.startswith(("127.", "localhost")):
        os.environ[_LOOPBACK_ONLY] = "0"  # read when ray is imported: keeps 127.0.0.1 as the node address
    import ray

    if address == LOCAL:
        ray.init(num_cpus=os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=address, log_to_driver=False)
    return ray


@contextmanager
def loopback_cluster(workers: int = 2, cpus_each: float = 1.0) -> Iterator[str]:
    """A Ray cluster on this machine with every server on 127.0.0.1 (for tests and benchmarks): a head with no CPUs,
    so that it schedules nothing itself, and `workers` worker nodes. Yields the head's address for `--ray`; the
    cluster is shut down afterwards."""
    before = os.environ.get(_LOOPBACK_ONLY)
    os.environ[_LOOPBACK_ONLY] = "0"  # read when ray is imported: keeps 127.0.0.1 as every node's address
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False,
                                                           "node_ip_address": "127.0.0.1"})
    try:
        for _ in range(workers):
            cluster.add_node(num_cpus=cpus_each, node_ip_address="127.0.0.1")
        cluster.wait_for_nodes()
        yield str(cluster.address)
    finally:
        cluster.shutdown()
        if before is None:
            os.environ.pop(_LOOPBACK_ONLY, None)
        else:
            os.environ[_LOOPBACK_ONLY] = before


def run_on_ray(config: RunnerConfig, work: Sequence[tuple[str, int]], run_locally: LocalRunner,
               on_progress: Callable[[Progress, str], None] | None = None) -> Progress:
    """Run the (task, run) pairs of `work` as Ray tasks, each through `run_locally` on its worker's node, and gather
    them into `config.out`.

    Raises:
        RunnerError: when the cluster cannot be reached, a node cannot run stacks, or the run files cannot be
            written.
    """
    assert config.ray is not None
    options = config.ray
    try:
        ray = connect(options.address)
    except (ConnectionError, RuntimeError, ValueError) as error:
        raise RunnerError(f"could not reach the Ray cluster at {options.address!r}: {error}") from None
    config.out.mkdir(parents=True, exist_ok=True)
    shared = portable(config)
    remote = ray.remote(homiebot_run).options(num_cpus=options.cpus_per_run, num_gpus=options.gpus_per_run,
                                              max_retries=LOST_WORKER_RETRIES, retry_exceptions=False)
    progress = Progress(total=len(work))
    again: queue.Queue[tuple[str, int]] = queue.Queue()
    running: dict[Any, tuple[str, int]] = {}

    def submit(pair: tuple[str, int]) -> None:
        running[remote.remote(shared, pair[0], pair[1], options.shared_out, run_locally)] = pair

    def report(summary: str) -> None:
        if on_progress is not None:
            on_progress(progress, summary)

    for pair in work:
        submit(pair)
    try:
        while running:
            ready, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
            for ref in ready:
                task_id, run_index = pair = running.pop(ref)
                try:
                    outcome: RunOutcome = ray.get(ref)
                except ray.exceptions.RayError as error:
                    cause = getattr(error, "cause", None) or error
                    if isinstance(cause, (NodeNotReady, RunFilesUnwritable)):
                        raise cause from None
                    progress.done += 1
                    progress.failed.append(f"task {task_id} run {run_index}: {_first_line(cause)}")
                    retried = progress.retry(pair, config.retries, again)
                    report(f"task {task_id} run {run_index}: failed on Ray ({_first_line(cause)})"
                           + ("; retrying the run" if retried else ""))
                else:
                    if not options.shared_out:
                        store_run(config.out, task_id, run_index, outcome.files, outcome.origin)
                    progress.done += 1
                    progress.failed.extend(outcome.failed)
                    retried = not outcome.has_result and progress.retry(pair, config.retries, again)
                    for summary in outcome.summaries:
                        report(f"{summary} (Ray node {outcome.node})" + ("; retrying the run" if retried else ""))
                while not again.empty():
                    submit(again.get())
    except BaseException:
        for ref in running:
            ray.cancel(ref, force=True)
        raise
    finally:
        ray.shutdown()
    return progress


def _first_line(error: BaseException) -> str:
    """The first line of an error's message (Ray's carry the remote traceback below it)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
