"""`homiebot run`: the EMMOE benchmark through the real ROS 2 stack.

For each job (`--jobs N`), one complete stack (simulator with skill servers, monitor, executor, evaluator, planner)
runs as separate processes on its own ROS_DOMAIN_ID, leased for the run (emmoe_core.ros_domains) so that no other
stack on the machine shares it. Pending (task, run) pairs are shared out between the jobs; each pair is one RunTask
goal on that stack's /emmoe/run_task. The evaluator node writes every run to `<out>/<task>/<run>/` as it goes
(trajectory.jsonl, views, episode.mcap, conversation.json, score.json), so a rerun skips the runs that have a
score.json. While runs go on the runner talks to the stack through ROS interfaces only: the RunTask result says how
the run ended (the planner owns the episode), and the evaluator's RunScore on /emmoe/run_scores says it is recorded
and scored; the runner never reads run files to learn that a run is over. At the end the experiment folder is scored
with emmoe_eval.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from emmoe_core import topics
from emmoe_eval.dataset import load_tasks, split_names, task_sort_key
from emmoe_core.ros_domains import NoFreeDomain, lease_domain
from emmoe_eval.runs import NOT_PLANNER_RESULTS, WRITE_FAILURE

from homiebot.bringup import EMMOE_SIM_NODES, PLANNER_NODE, config_path, stack_environment, \
    require_loopback_stack, stack_parameters, stack_process_specs
from homiebot.ray_runner import run_on_ray
from homiebot.run_config import Progress, RunFilesUnwritable, RunnerConfig, RunnerError
from homiebot.run_folders import pending_runs
from homiebot.setting import record_setting
from homiebot.supervisor import Supervisor

EVALUATOR_NODE = topics.EVALUATOR_NODE
GOAL_REQUEST_TRIES = 3
GOAL_REQUEST_WAIT_S = 10.0

_END_WORDS = {"end": "ended by the agent", "step_limit": "step limit", "gave_up": "the planner gave up",
              "cancelled": "cancelled", "error": "infrastructure failure"}


class NodeDied(RunnerError):
    """A node process of the stack exited during a run."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name


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


def stack_overrides(config: RunnerConfig) -> dict[str, dict[str, object]]:
    """An experiment's per-node parameters over the parameter file: the setting's, the conditions', the --set's."""
    data_dir, out = str(config.data_dir.resolve()), str(config.out.resolve())
    planner: dict[str, object] = {"data_dir": data_dir, "max_steps": config.max_steps}
    planner["backend"] = config.planner
    if config.planner == "openai":
        planner.update(openai_model=config.model, openai_base_url=config.base_url)
    elif config.planner == "hf":
        planner["hf_model_path"] = str(Path(config.model).resolve())
    elif config.planner == "homiebot" and config.model:
        planner["homiebot_adapter_dir"] = str(Path(config.model).resolve())
    overrides: dict[str, dict[str, object]] = {
        PLANNER_NODE: planner,
        EVALUATOR_NODE: {"out_dir": out, "data_dir": data_dir, "record_videos": config.record_videos},
    }
    for node, values in stack_parameters(config.setting, config.overrides, config.conditions,
                                                  config.perception).items():
        overrides.setdefault(node, {}).update(values)
    return overrides


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
        self.out = config.out
        self.supervisor = Supervisor(stack_process_specs(params_file, overrides, environment, label), echo=echo)
        self.context: Any = None
        self.node: Any = None
        self.scores: dict[tuple[str, int], Any] = {}

    def _on_score(self, message: Any) -> None:
        self.scores[(message.episode_id, int(message.run_index))] = message

    def unwritable(self, task_id: str, run_index: int) -> str:
        """The evaluator's write-failure message for a run ("" when its files are being written fine)."""
        score = self.scores.get((task_id, run_index))
        return str(score.error_msg) if score is not None and score.error_msg.startswith(WRITE_FAILURE) else ""

    def start(self, timeout_s: float) -> None:
        """Start the processes and wait until the planner's /emmoe/run_task is served."""
        import rclpy
        from emmoe_core.action_client import ActionClient
        from emmoe_core.ros_helpers import DISCOVERY_GRACE_S
        from rclpy.context import Context
        from emmoe_core.qos import scores_qos

        from emmoe_interfaces.action import RunTask
        from emmoe_interfaces.msg import RunScore

        self.supervisor.start()
        self.context = Context()
        rclpy.init(context=self.context, domain_id=self.domain_id)
        self.node = rclpy.create_node(f"homiebot_run_{os.getpid()}", context=self.context)
        self.client = ActionClient(self.node, RunTask, topics.RUN_TASK_ACTION)
        self.node.create_subscription(RunScore, topics.SCORES_TOPIC, self._on_score, scores_qos())
        deadline = time.monotonic() + timeout_s
        while not self.client.wait_for_server(timeout_sec=1.0):
            ended = self.supervisor.exited()
            if ended:
                raise RunnerError(self._death_message(ended[0].name, ended[0].returncode))
            if time.monotonic() > deadline:
                raise RunnerError(f"the stack on ROS_DOMAIN_ID {self.domain_id} did not come up in {timeout_s:.0f} s")
        time.sleep(DISCOVERY_GRACE_S)  # the server may not see this client yet

    def _death_message(self, name: str, code: int) -> str:
        tail = "\n".join(f"    {line}" for line in self.supervisor.lines[name][-15:])
        return f"node process {name} exited with status {code}; its last lines:\n{tail}"

    def _raise_if_a_node_died(self) -> None:
        ended = self.supervisor.exited()
        if ended:
            raise NodeDied(ended[0].name, self._death_message(ended[0].name, ended[0].returncode))

    def _executor(self) -> Any:
        from rclpy.executors import SingleThreadedExecutor

        executor = SingleThreadedExecutor(context=self.context)
        executor.add_node(self.node)
        return executor

    def run_task(self, task_id: str, run_index: int, max_steps: int, timeout_s: float) -> Any:
        """One RunTask goal; returns its result or raises RunnerError (NodeDied when a node process exits)."""
        from emmoe_core.ros_helpers import CallStatus, send_action_goal

        from emmoe_interfaces.action import RunTask

        goal = RunTask.Goal(task_id=task_id, run_index=run_index, max_steps=max_steps)
        executor = self._executor()
        try:
            # Right after discovery Fast DDS may drop a goal request: an unanswered request is sent again.
            outcome = send_action_goal(self.client, goal, accept_timeout_s=GOAL_REQUEST_WAIT_S,
                                       result_timeout_s=timeout_s,
                                       cancel=lambda: bool(self.supervisor.exited() or self.unwritable(task_id,
                                                                                                   run_index)),
                                       server_wait_s=GOAL_REQUEST_WAIT_S, cancel_wait_s=10.0,
                                       request_tries=GOAL_REQUEST_TRIES, executor=executor)
            self._raise_if_a_node_died()
            if self.unwritable(task_id, run_index):  # cancelled: nothing more of the run could be recorded
                raise RunFilesUnwritable(task_id, run_index, self.unwritable(task_id, run_index), self.out)
            if outcome.status is CallStatus.TIMEOUT:
                raise RunnerError(f"task {task_id} run {run_index} took longer than {timeout_s:.0f} s")
            if not outcome.ok:
                raise RunnerError(f"task {task_id} run {run_index}: {outcome.message}")
            return outcome.result
        finally:
            executor.shutdown()

    def run_and_score(self, task_id: str, run_index: int, max_steps: int, timeout_s: float) -> tuple[Any, Any]:
        """One run: its RunTask result and the evaluator's RunScore. When the planner answers BUSY, an earlier
        request of this run was accepted but its answer lost (the goal request is sent again when unanswered): that
        run is under way, its score arrives when it ends, and its result is made from the score.

        Raises:
            RunnerError: as run_task and wait_for_score (NodeDied when a node process exits).
        """
        from emmoe_interfaces.action import RunTask

        result = self.run_task(task_id, run_index, max_steps, timeout_s)
        if result.error_code != RunTask.Result.BUSY:
            return result, self.wait_for_score(task_id, run_index)
        score = self.wait_for_score(task_id, run_index, timeout_s)
        return RunTask.Result(success=score.ended_with_end, episode_id=score.episode_id, steps=score.steps), score

    def wait_for_score(self, task_id: str, run_index: int, timeout_s: float = 60.0) -> Any:
        """The evaluator's RunScore of a run the planner has ended (its last StepRecord carried the end reason).

        Raises:
            RunnerError: when no score arrives in time (NodeDied when a node process exits meanwhile).
        """
        from emmoe_core.ros_helpers import WaitStatus, spin_until

        key = (task_id, run_index)
        executor = self._executor()
        try:
            status = spin_until(executor, lambda: key in self.scores, timeout_s,
                                cancel=lambda: bool(self.supervisor.exited()), poll_s=0.05)
            if status is WaitStatus.CANCELLED:
                self._raise_if_a_node_died()
            if status is not WaitStatus.DONE:
                raise RunnerError(f"the evaluator did not score task {task_id} run {run_index} in {timeout_s:.0f} s")
            return self.scores.pop(key)
        finally:
            executor.shutdown()

    def close_runs_after_death(self, died: str) -> bool:
        """After a node died mid-run: have the evaluator close what it recorded of the run (an infrastructure
        failure, reason error, never the planner's result).

        Returns whether the evaluator could be asked (it cannot when it is the node that died).
        """
        from emmoe_core.ros_helpers import call_service
        from std_srvs.srv import Trigger

        if died.endswith(EVALUATOR_NODE):
            return False
        client = self.node.create_client(Trigger, topics.FINISH_RUNS_SERVICE)
        executor = self._executor()
        try:
            return call_service(client, Trigger.Request(), timeout_s=30.0, server_wait_s=5.0, executor=executor).ok
        finally:
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
                  on_progress: Callable[[Progress, str], None] | None = None, echo_nodes: bool = False,
                  work: Sequence[tuple[str, int]] | None = None) -> Progress:
    """Run every pending (task, run) pair (or just the pairs of `work`) on `config.jobs` parallel stacks of this
    machine, each on a leased domain id, or on Ray with `config.ray`.

    Raises:
        RunnerError: when a stack fails to start or dies, or DDS traffic could leave this machine.
        SettingMismatch: `config.out` holds runs of another setting (homiebot.setting.record_setting).
    """
    require_loopback_stack(RunnerError)
    if work is None:
        task_ids = select_tasks(config.data_dir, config.tasks)
        record_setting(config.out, config.setting, config.conditions, config.perception)
        work = pending_runs(config.out, task_ids, config.runs)
        where = "Ray" if config.ray is not None else f"{min(config.jobs, max(1, len(work)))} stack(s)"
        report(f"{len(task_ids)} task(s) x {config.runs} run(s): {len(task_ids) * config.runs - len(work)} already "
               f"done, {len(work)} to run with planner {config.planner} on {where}; results in {config.out}")
    if config.ray is not None and work:
        return run_on_ray(config, work, run_benchmark, on_progress)
    progress = Progress(total=len(work))
    if not work:
        return progress
    config.out.mkdir(parents=True, exist_ok=True)
    pairs: queue.Queue[tuple[str, int]] = queue.Queue()
    for pair in work:
        pairs.put(pair)
    try:
        leases = ([lease_domain() for _ in range(min(config.jobs, len(work)))] if config.domain_id is None
                  else [lease_domain(candidates=(config.domain_id,))])
    except NoFreeDomain as error:
        raise RunnerError(str(error)) from None
    try:
        _run_on_stacks(config, pairs, [lease.domain_id for lease in leases], progress, on_progress, echo_nodes)
    finally:
        for lease in leases:
            lease.release()
    return progress


def _run_on_stacks(config: RunnerConfig, pairs: queue.Queue[tuple[str, int]], domains: Sequence[int],
                   progress: Progress, on_progress: Callable[[Progress, str], None] | None, echo_nodes: bool) -> None:
    """Run the queued (task, run) pairs on one stack per domain id, a thread each.

    Raises:
        RunnerError: when a stack fails to start or dies.
    """
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
                    result, score = stack.run_and_score(task_id, run_index, config.max_steps, config.run_timeout_s)
                except NodeDied as death:
                    # Mid-run, or after the run's result but before its score: the run is recorded as failed (what
                    # the evaluator has of it is scored), the stack restarts and the remaining runs go on.
                    recorded = stack.close_runs_after_death(death.name)
                    with progress.lock:
                        progress.done += 1
                        progress.failed.append(f"task {task_id} run {run_index}: {death}")
                        again = progress.retry((task_id, run_index), config.retries, pairs)
                    if on_progress is not None:
                        on_progress(progress, f"task {task_id} run {run_index}: failed, node {death.name} died"
                                    + ("" if recorded else " (nothing scored: the evaluator could not record it)")
                                    + "; restarting the stack" + ("; retrying the run" if again else ""))
                    stack.stop()
                    stack = stacks[index] = Stack(config, stack.domain_id, stack.label, echo_nodes)
                    stack.start(config.startup_timeout_s)
                    continue
                if score.end_reason == "error" and score.error_msg.startswith(WRITE_FAILURE):
                    raise RunFilesUnwritable(task_id, run_index, score.error_msg, config.out)
                with progress.lock:
                    progress.done += 1
                    if result.error_code != 0:
                        progress.failed.append(f"task {task_id} run {run_index}: {result.error_msg}")
                    again = (score.end_reason in NOT_PLANNER_RESULTS
                             and progress.retry((task_id, run_index), config.retries, pairs))
                    summary = (f"task {task_id} run {run_index}: {result.steps} steps, "
                               f"{_END_WORDS.get(score.end_reason, score.end_reason)}"
                               + (f", TP {100 * score.task_progress:.0f}%" if score.task_known else "")
                               + (f" (error: {result.error_msg})" if result.error_code else "")
                               + ("; retrying the run" if again else ""))
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
