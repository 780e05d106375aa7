"""`homiebot run`: the EMMOE benchmark through the real ROS 2 stack.

For each job (`--jobs N`), one complete stack (simulator with skill servers, monitor, executor,
evaluator, planner) runs as separate processes on its own ROS_DOMAIN_ID. Pending (task, run) pairs
are shared out between the jobs; each pair is one RunTask goal on that stack's /emmoe/run_task. The
evaluator node writes every run to `<out>/<task>/<run>/` as it goes (trajectory.jsonl, views,
episode.mcap, conversation.json, score.json), so a rerun skips the runs that have a score.json.
At the end the experiment folder is scored with emmoe_eval.
"""

from __future__ import annotations

import json
import os
import queue
import random
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emmoe_eval.dataset import load_tasks, split_names, task_sort_key

from homiebot.bringup import EMMOE_SIM_NODES, config_path, node_command, parse_overrides, stack_environment
from homiebot.ros_clients import require_localhost_discovery
from homiebot.supervisor import ProcessSpec, Supervisor

PLANNERS = ("smollm2", "mock", "expert", "openai", "hf", "random")
SCORE_FILE = "score.json"
PLANNER_NODE = "planner"
EVALUATOR_NODE = "emmoe_evaluator"
GOAL_REQUEST_TRIES = 3
GOAL_REQUEST_WAIT_S = 10.0
# Seconds the evaluator gets to close a run by itself (End, step limit) once all its steps are recorded.
FINISH_GRACE_S = 2.0
# Domain ids handed to parallel stacks (valid Linux DDS domains; 0, everyone's default, is never used).
_DOMAIN_IDS = list(range(1, 102)) + list(range(215, 233))


class RunnerError(RuntimeError):
    """The benchmark could not run (bad selection, stack failure); the message says why."""


class NodeDied(RunnerError):
    """A node process of the stack exited during a run."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


@dataclass(frozen=True)
class RunnerConfig:
    """What `homiebot run` does.

    Attributes:
        tasks: "train", "test", "all" or comma-separated task ids ("91,93").
        runs: runs per task (the benchmark uses 3).
        planner: planner backend (see PLANNERS).
        out: experiment folder.
        data_dir: EMMOE data folder with train/ and test/.
        jobs: parallel stacks.
        max_steps: planner step limit per run.
        model: openai: model name; hf: local model path.
        base_url: openai: server URL.
        params_file: ROS parameter file of the stack.
        overrides: extra `NODE.PARAM=VALUE` parameters.
        run_timeout_s: longest a single run may take before it is cancelled.
        startup_timeout_s: longest a stack may take to come up.
    """

    tasks: str
    out: Path
    runs: int = 3
    planner: str = "smollm2"
    data_dir: Path = Path("data")
    jobs: int = 1
    max_steps: int = 20
    model: str = ""
    base_url: str = ""
    params_file: Path | None = None
    overrides: tuple[str, ...] = ()
    run_timeout_s: float = 1800.0
    startup_timeout_s: float = 180.0

    def __post_init__(self) -> None:
        if self.planner not in PLANNERS:
            raise ValueError(f"unknown planner {self.planner!r}; expected one of {', '.join(PLANNERS)}")
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


def _line_count(path: Path) -> int:
    """Lines in a file (0 when it does not exist yet)."""
    try:
        with path.open("rb") as handle:
            return sum(1 for _ in handle)
    except OSError:
        return 0


def select_tasks(data_dir: Path, selection: str) -> list[str]:
    """Task ids of a split name or an id list, in benchmark order.

    Raises:
        RunnerError: unknown ids, or a split with no tasks in data_dir.
    """
    available = load_tasks(data_dir, "all")
    if selection in ("train", "test", "all"):
        splits = set(split_names(selection))
        chosen = [task_id for task_id, task in available.items() if task.split in splits]
        if not chosen:
            raise RunnerError(f"no {selection} tasks in {data_dir} (it holds {', '.join(sorted(available, key=task_sort_key)) or 'none'})")
    else:
        chosen = [item.strip() for item in selection.split(",") if item.strip()]
        known = ", ".join(sorted(available, key=task_sort_key))
        if not chosen:
            raise RunnerError(f"--tasks {selection!r} names no task; use train, test, all or ids like 91,93")
        missing = [task_id for task_id in chosen if task_id not in available]
        if missing:
            raise RunnerError(f"unknown task id(s) {', '.join(missing)} in {data_dir}; available: {known}")
    return sorted(dict.fromkeys(chosen), key=task_sort_key)


def pending_runs(out: Path, task_ids: Sequence[str], runs: int) -> list[tuple[str, int]]:
    """The (task, run) pairs without a finished, scored run folder."""
    return [(task_id, run) for task_id in task_ids for run in range(1, runs + 1)
            if not (out / task_id / str(run) / SCORE_FILE).is_file()]


def stack_overrides(config: RunnerConfig) -> dict[str, dict[str, object]]:
    """Per-node parameters of one experiment, on top of the parameter file (user --set items last)."""
    data_dir, out = str(config.data_dir.resolve()), str(config.out.resolve())
    planner: dict[str, object] = {"data_dir": data_dir, "max_steps": config.max_steps}
    planner["backend"] = config.planner
    if config.planner == "openai":
        planner.update(openai_model=config.model, openai_base_url=config.base_url)
    elif config.planner == "hf":
        planner["hf_model_path"] = str(Path(config.model).resolve())
    overrides: dict[str, dict[str, object]] = {
        PLANNER_NODE: planner,
        EVALUATOR_NODE: {"out_dir": out, "data_dir": data_dir, "max_steps": config.max_steps},
    }
    for node, values in parse_overrides(config.overrides).items():
        overrides.setdefault(node, {}).update(values)
    return overrides


@dataclass
class Progress:
    """Counts shared by the job threads."""

    total: int
    done: int = 0
    failed: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Stack:
    """One running stack on its own domain, with an rclpy context to talk to it."""

    def __init__(self, config: RunnerConfig, domain_id: int, label: str, echo: bool) -> None:
        params_file = config.params_file or config_path()
        overrides = stack_overrides(config)
        known = {spec.name for spec in EMMOE_SIM_NODES}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise RunnerError(f"--set names unknown node(s) {', '.join(unknown)}; the stack has {', '.join(sorted(known))}")
        environment = stack_environment(domain_id)
        self.domain_id = domain_id
        self.label = label
        self.supervisor = Supervisor(
            [ProcessSpec(f"{label}{spec.name}", tuple(node_command(spec, params_file, overrides.get(spec.name))),
                         environment) for spec in EMMOE_SIM_NODES],
            echo=echo)
        self.context: Any = None
        self.node: Any = None
        self.out = config.out
        self.scores: dict[tuple[str, int], dict[str, Any]] = {}

    def _on_score(self, message: Any) -> None:
        score = json.loads(message.data)
        self.scores[(str(score.get("episode_id")), int(score.get("run_index", 0)))] = score

    def start(self, timeout_s: float) -> None:
        """Start the processes and wait until the planner's /emmoe/run_task is served."""
        import rclpy
        from emmoe_eval.evaluator_node import SCORES_TOPIC
        from rclpy.action import ActionClient
        from rclpy.context import Context
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        from emmoe_interfaces.action import RunTask

        self.supervisor.start()
        self.context = Context()
        rclpy.init(context=self.context, domain_id=self.domain_id)
        self.node = rclpy.create_node(f"homiebot_run_{os.getpid()}", context=self.context)
        self.client = ActionClient(self.node, RunTask, "/emmoe/run_task")
        scores_qos = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.VOLATILE)
        self.node.create_subscription(String, SCORES_TOPIC, self._on_score, scores_qos)
        deadline = time.monotonic() + timeout_s
        while not self.client.wait_for_server(timeout_sec=1.0):
            ended = self.supervisor.exited()
            if ended:
                raise RunnerError(self._death_message(ended[0].name, ended[0].returncode))
            if time.monotonic() > deadline:
                raise RunnerError(f"the stack on ROS_DOMAIN_ID {self.domain_id} did not come up in {timeout_s:.0f} s")

    def _death_message(self, name: str, code: int) -> str:
        tail = "\n".join(f"    {line}" for line in self.supervisor.lines[name][-15:])
        return f"node process {name} exited with status {code}; its last lines:\n{tail}"

    def run_task(self, task_id: str, run_index: int, max_steps: int, timeout_s: float) -> Any:
        """One RunTask goal; returns its result or raises RunnerError."""
        from rclpy.executors import SingleThreadedExecutor

        from emmoe_interfaces.action import RunTask

        executor = SingleThreadedExecutor(context=self.context)
        executor.add_node(self.node)
        try:
            goal = RunTask.Goal(task_id=task_id, run_index=run_index, max_steps=max_steps)
            handle = None
            # Right after discovery Fast DDS may drop a goal request; it is sent again until answered.
            for _ in range(GOAL_REQUEST_TRIES):
                future = self.client.send_goal_async(goal)
                executor.spin_until_future_complete(future, timeout_sec=GOAL_REQUEST_WAIT_S)
                if future.done():
                    handle = future.result()
                    break
            if handle is None or not handle.accepted:
                raise RunnerError(f"the planner did not accept task {task_id} run {run_index}")
            result_future = handle.get_result_async()
            deadline = time.monotonic() + timeout_s
            while not result_future.done():
                executor.spin_once(timeout_sec=0.5)
                ended = self.supervisor.exited()
                if ended:
                    raise NodeDied(ended[0].name, self._death_message(ended[0].name, ended[0].returncode))
                if time.monotonic() > deadline:
                    cancel = handle.cancel_goal_async()
                    executor.spin_until_future_complete(cancel, timeout_sec=10.0)
                    raise RunnerError(f"task {task_id} run {run_index} took longer than {timeout_s:.0f} s")
            return result_future.result().result
        finally:
            executor.remove_node(self.node)
            executor.shutdown()

    def wait_for_score(self, task_id: str, run_index: int, steps: int, timeout_s: float = 60.0) -> dict[str, Any]:
        """The evaluator's score of a run that the planner has finished.

        The evaluator closes a run by itself at End or the step limit. A run the planner ended early (an
        error) is closed through the evaluator's finish_runs service, once all of its `steps` StepRecords
        are on disk (they travel on another topic than the RunTask result, so they may still be arriving).

        Raises:
            RunnerError: when no score arrives in time.
        """
        from rclpy.executors import SingleThreadedExecutor
        from std_srvs.srv import Trigger

        key = (task_id, run_index)
        trajectory = self.out / task_id / str(run_index) / "trajectory.jsonl"
        executor = SingleThreadedExecutor(context=self.context)
        executor.add_node(self.node)
        client = self.node.create_client(Trigger, f"/{EVALUATOR_NODE}/finish_runs")
        started = time.monotonic()
        asked = False
        try:
            while key not in self.scores:
                executor.spin_once(timeout_sec=0.2)
                waited = time.monotonic() - started
                if waited > timeout_s:
                    raise RunnerError(f"the evaluator did not score task {task_id} run {run_index} in {timeout_s:.0f} s")
                if not asked and waited > FINISH_GRACE_S and _line_count(trajectory) >= steps:
                    if client.wait_for_service(timeout_sec=5.0):
                        client.call_async(Trigger.Request())
                        asked = True
            return self.scores.pop(key)
        finally:
            executor.remove_node(self.node)
            executor.shutdown()
            self.node.destroy_client(client)

    def close_runs_after_death(self, died: str) -> bool:
        """After a node died mid-run: have the evaluator score what it recorded of the run (a failed run).

        Returns whether the evaluator could be asked (it cannot when it is the node that died).
        """
        from rclpy.executors import SingleThreadedExecutor
        from std_srvs.srv import Trigger

        if died.endswith(EVALUATOR_NODE):
            return False
        client = self.node.create_client(Trigger, f"/{EVALUATOR_NODE}/finish_runs")
        executor = SingleThreadedExecutor(context=self.context)
        executor.add_node(self.node)
        try:
            if not client.wait_for_service(timeout_sec=5.0):
                return False
            future = client.call_async(Trigger.Request())
            executor.spin_until_future_complete(future, timeout_sec=30.0)
            return future.done()
        finally:
            executor.remove_node(self.node)
            executor.shutdown()
            self.node.destroy_client(client)

    def stop(self) -> None:
        """Stop the processes and the client context."""
        import rclpy

        if self.node is not None:
            self.node.destroy_node()
        if self.context is not None:
            rclpy.try_shutdown(context=self.context)
        self.supervisor.stop()


def run_benchmark(config: RunnerConfig, report: Callable[[str], None] = print,
                  on_progress: Callable[[Progress, str], None] | None = None, echo_nodes: bool = False) -> Progress:
    """Run every pending (task, run) pair on `config.jobs` parallel stacks.

    Raises:
        RunnerError: when a stack fails to start or dies.
    """
    require_localhost_discovery()
    task_ids = select_tasks(config.data_dir, config.tasks)
    work = pending_runs(config.out, task_ids, config.runs)
    total = len(task_ids) * config.runs
    report(f"{len(task_ids)} task(s) x {config.runs} run(s): {total - len(work)} already done, {len(work)} to run "
           f"with planner {config.planner} on {min(config.jobs, max(1, len(work)))} stack(s); results in {config.out}")
    progress = Progress(total=len(work))
    if not work:
        return progress
    config.out.mkdir(parents=True, exist_ok=True)
    pairs: queue.Queue[tuple[str, int]] = queue.Queue()
    for pair in work:
        pairs.put(pair)
    domains = random.SystemRandom().sample(_DOMAIN_IDS, min(config.jobs, len(work)))
    errors: list[BaseException] = []

    stacks = [Stack(config, domain, f"{index}:" if len(domains) > 1 else "", echo_nodes)
              for index, domain in enumerate(domains)]

    def job(index: int) -> None:
        stack = stacks[index]
        try:
            stack.start(config.startup_timeout_s)
            while not errors:
                try:
                    task_id, run_index = pairs.get_nowait()
                except queue.Empty:
                    return
                ended = stack.supervisor.exited()
                if ended:  # a node died after the previous run had already been answered
                    if on_progress is not None:
                        on_progress(progress, f"node {ended[0].name} died (status {ended[0].returncode}); "
                                    "restarting the stack")
                    stack.stop()
                    stack = stacks[index] = Stack(config, stack.domain_id, stack.label, echo_nodes)
                    stack.start(config.startup_timeout_s)
                try:
                    result = stack.run_task(task_id, run_index, config.max_steps, config.run_timeout_s)
                except NodeDied as death:
                    # The run is recorded as failed (what the evaluator has of it is scored), the stack restarts
                    # and the remaining runs go on.
                    recorded = stack.close_runs_after_death(death.name)
                    with progress.lock:
                        progress.done += 1
                        progress.failed.append(f"task {task_id} run {run_index}: {death}")
                    if on_progress is not None:
                        on_progress(progress, f"task {task_id} run {run_index}: failed, node {death.name} died"
                                    + ("" if recorded else " (nothing scored: the evaluator could not record it)")
                                    + "; restarting the stack")
                    stack.stop()
                    stack = stacks[index] = Stack(config, stack.domain_id, stack.label, echo_nodes)
                    stack.start(config.startup_timeout_s)
                    continue
                score = stack.wait_for_score(task_id, run_index, result.steps)
                with progress.lock:
                    progress.done += 1
                    if result.error_code != 0:
                        progress.failed.append(f"task {task_id} run {run_index}: {result.error_msg}")
                    progress_value = score.get("task_progress")
                    summary = (f"task {task_id} run {run_index}: {result.steps} steps, "
                               f"{'ended by the agent' if result.success else 'no End'}"
                               + (f", TP {100 * progress_value:.0f}%" if progress_value is not None else "")
                               + (f" (error: {result.error_msg})" if result.error_code else ""))
                if on_progress is not None:
                    on_progress(progress, summary)
        except BaseException as error:  # reported by the caller after every job has stopped
            errors.append(error)
        finally:
            stacks[index].stop()

    threads = [threading.Thread(target=job, args=(index,), daemon=True) for index in range(len(stacks))]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=0.5)
    except KeyboardInterrupt:
        errors.append(KeyboardInterrupt())
        for stack in stacks:
            stack.supervisor.stop()
        for thread in threads:
            thread.join(timeout=60)
        raise
    if errors:
        raise errors[0] if isinstance(errors[0], RunnerError) else RunnerError(str(errors[0]))
    return progress
