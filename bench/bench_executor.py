"""Benchmark of homiebot_executor: M3 skill success rates and wall times in the generated MuJoCo apartment, and the
overhead of a /subtask round trip.

Skill trials (no ROS): for each seed, a fresh apartment; then episodes of Go to (a random object or piece of
furniture), Pick (a random object on an open surface or in a drawer after opening it), Put (on a random table, counter,
desk, sofa or tv stand, or into the open fridge), Open and Close (the fridge door or a drawer). Each skill runs through
the executor's attempt loop (up to 3 attempts, arm reset before each) exactly as /subtask runs it; a trial counts
once per subtask. Prints per-skill first-attempt and subtask success rates, median and 90th-percentile wall time of a
subtask, and the failure reasons.

Round trip (ROS, `--round-trip`): the executor node, a stand-in QueryScene server and a skill server whose policy
answers at once, each in its own process; the client times End, a subtask failing its checks (F2) and a Pick that
goes through the skill server: the executor's overhead without any skill simulation.

Across (`--across`): wall time of Go to from the fridge to the tv stand and back in each apartment.

Stop after a soak (`--sigint N`): N executor nodes one after another, each sent `--soak` goals (default 1,000) and
then SIGINT; counts those gone within 2 s of the signal (the goal: all of them).

    python bench/bench_executor.py --seeds 10            # skill rates (about 1 s per trial)
    python bench/bench_executor.py --round-trip          # /subtask overhead
    python bench/bench_executor.py --soak 10000          # 10,000 consecutive goals: lost count, p99, warnings
    python bench/bench_executor.py --sigint 20           # 20 executors, SIGINT after 1,000 goals each
    python bench/bench_executor.py --across --seeds 10   # Go to across the apartment
Results go to bench/results/executor.json.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
import collections
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "executor.json"
SURFACE_MODELS = ("table", "counter", "desk", "sofa", "tv_stand")


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def skill_trials(seeds: list[int], episodes: int) -> dict[str, Any]:
    """Run the skill episodes; returns per-skill statistics."""
    from habitat_bridge import apartment
    from habitat_bridge.backends.mujoco_backend import MujocoBackend
    from habitat_bridge.scene_spec import Articulation

    from homiebot_executor.execution import run_attempts
    from homiebot_executor.policies.m3 import PrivilegedSkills
    from homiebot_executor.skills import SkillGoal

    backend = MujocoBackend()
    records: dict[str, list[dict[str, Any]]] = defaultdict(list)
    skills: Any = None

    def attempt(action: str, goal: SkillGoal) -> bool:
        started = time.perf_counter()
        result = run_attempts(action, goal, lambda g, number: skills.run(g), lambda: backend.held_object() or "")
        wall = time.perf_counter() - started
        first = result.attempts[0] if result.attempts else None
        records[goal.skill].append({
            "success": result.success, "first_attempt": bool(first and first.success), "wall_s": wall,
            "attempts": len(result.attempts), "error_type": result.error_type,
            "reasons": [outcome.status.value + (": " + outcome.message if outcome.message else "")
                        for outcome in result.attempts if not outcome.success],
            "sim_steps": sum(outcome.sim_steps for outcome in result.attempts),
        })
        return result.success

    for seed in seeds:
        rng = random.Random(seed)
        spec_seed = seed
        backend.reset(apartment.generate_apartment(spec_seed))
        skills = PrivilegedSkills(backend)
        spec = backend.spec
        for _ in range(episodes):
            states = [state for state in backend.object_states() if state.kind == "object"]
            free = [state for state in states if not state.inside or state.receptacle.startswith("kitchen_drawer")]
            # Go to a random place or object.
            pieces = [piece.name for piece in spec.furniture if piece.model != "tv"]
            target = rng.choice(pieces + [state.name for state in states])
            attempt("Go to", SkillGoal("navigate", target,
                                       target_kind="object" if target in {s.name for s in states} else "place"))
            # Open and close the fridge or a drawer.
            containers = [state.name for state in backend.container_states()
                          if not spec.owner_of(state.name).model == "cabinet"]
            part = rng.choice(containers)
            attempt("Go to", SkillGoal("navigate", part))
            attempt("Open", SkillGoal("open", part))
            attempt("Close", SkillGoal("close", part))
            # Pick something (opening its drawer first), then put it somewhere.
            if not free:
                continue
            obj = rng.choice(free)
            item = spec.item(obj.receptacle)
            drawer = item.name if isinstance(item, Articulation) else None
            fridge = next((piece for piece in spec.furniture if piece.model == "fridge"), None)
            into_fridge = fridge is not None and rng.random() < 0.25
            if fridge is not None and into_fridge:
                # The planner's rule: open the receptacle before picking (the hand must be empty to open).
                door = fridge.articulations[0].name
                attempt("Go to", SkillGoal("navigate", door))
                attempt("Open", SkillGoal("open", door))
            if drawer:
                attempt("Go to", SkillGoal("navigate", drawer))
                attempt("Open", SkillGoal("open", drawer))
            attempt("Go to", SkillGoal("navigate", obj.name, target_kind="object"))
            picked = attempt("Pick", SkillGoal("pick", obj.name))
            if not picked:
                continue
            places = [piece.name for piece in spec.furniture if piece.model in SURFACE_MODELS]
            place = fridge.name if fridge is not None and into_fridge else rng.choice(places)
            attempt("Go to", SkillGoal("navigate", place))
            attempt("Put", SkillGoal("put", backend.held_object() or obj.name, place=place))
            if backend.held_object():
                backend.open_gripper()
                backend.step(0.5)
    backend.close()
    summary: dict[str, Any] = {}
    for skill, rows in sorted(records.items()):
        walls = [row["wall_s"] for row in rows]
        reasons = Counter(reason.split(":")[0] + ":" + ":".join(reason.split(":")[1:2])[:60]
                          for row in rows for reason in row["reasons"])
        summary[skill] = {
            "trials": len(rows),
            "subtask_success_rate": sum(row["success"] for row in rows) / len(rows),
            "first_attempt_success_rate": sum(row["first_attempt"] for row in rows) / len(rows),
            "median_wall_s": statistics.median(walls),
            "p90_wall_s": percentile(walls, 0.9),
            "median_sim_steps": statistics.median(row["sim_steps"] for row in rows),
            "failure_reasons": dict(reasons.most_common(8)),
        }
    return summary


def across_apartment(seeds: list[int]) -> dict[str, Any]:
    """Wall time of Go to from the fridge to the tv stand (across the apartment) and back, one per seed."""
    from habitat_bridge import apartment
    from habitat_bridge.backends.mujoco_backend import MujocoBackend

    from homiebot_executor.policies.m3 import PrivilegedSkills
    from homiebot_executor.skills import SkillGoal

    backend = MujocoBackend()
    walls, paths, successes = [], [], 0
    for seed in seeds:
        backend.reset(apartment.generate_apartment(seed))
        skills = PrivilegedSkills(backend)
        skills.run(SkillGoal("navigate", "fridge_0"))
        for target in ("tv_stand_0", "fridge_0"):
            start = backend.robot_state().base.position
            started = time.perf_counter()
            outcome = skills.run(SkillGoal("navigate", target))
            walls.append(time.perf_counter() - started)
            paths.append(math.dist(start[:2], backend.robot_state().base.position[:2]))
            successes += outcome.success
    backend.close()
    return {"trials": len(walls), "success_rate": successes / len(walls),
            "median_wall_s": round(statistics.median(walls), 3), "max_wall_s": round(max(walls), 3),
            "median_straight_line_m": round(statistics.median(paths), 2)}


class _Output:
    """Reads a child's output to its end (a child whose output pipe is full blocks in its next log line, and its
    goals then stop being answered), counting the warnings and keeping the last lines."""

    def __init__(self, stream: Any) -> None:
        import threading

        self.warnings = 0
        self.tail: collections.deque[str] = collections.deque(maxlen=20)
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self.tail.append(line.rstrip("\n"))
            self.warnings += "[WARN]" in line


def _start_child(command: tuple[str, ...]) -> tuple[Any, _Output]:
    """A child Python process (its first line awaited) and the reader of the rest of its output."""
    import subprocess

    child = subprocess.Popen([sys.executable, *command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert child.stdout is not None
    child.stdout.readline()
    return child, _Output(child.stdout)


EXECUTOR_COMMAND = ("-m", "homiebot_executor.executor_node")


@contextmanager
def _subtask_stack(with_executor: bool = True) -> Iterator[Any]:
    """The executor node (unless `with_executor` is false: the caller starts its own), the static scene stand-in and
    an instant skill server, each in its own process as deployed, and an ActionClient on /subtask spun by a thread of
    this process. Yields the client; `client.outputs` holds each child's output reader by name."""
    import os
    import threading

    import rclpy
    from emmoe_core.action_client import ActionClient
    from emmoe_core.dds_guard import require_loopback_dds
    from emmoe_interfaces.action import ExecuteSubtask
    from rclpy.executors import SingleThreadedExecutor

    require_loopback_dds()  # this client and the children (they inherit the environment) stay on loopback
    os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))  # Linux-valid DDS domain ids
    static_scene = Path(__file__).resolve().parents[1] / "src" / "homiebot_executor" / "test" / "static_scene.py"
    commands = {"static_scene": (str(static_scene),), "skills": ("-c", INSTANT_SKILLS)}
    if with_executor:
        commands["executor"] = EXECUTOR_COMMAND
    started = {name: _start_child(command) for name, command in commands.items()}
    children = [child for child, _ in started.values()]
    rclpy.init()
    client_node = rclpy.create_node("bench_client")
    spinner = SingleThreadedExecutor()
    spinner.add_node(client_node)
    threading.Thread(target=spinner.spin, daemon=True).start()
    client: Any = ActionClient(client_node, ExecuteSubtask, "/subtask")
    client.outputs = {name: output for name, (_, output) in started.items()}
    if with_executor:
        client.wait_for_server(timeout_sec=30)
    try:
        yield client
    finally:
        spinner.shutdown()
        client.destroy()
        client_node.destroy_node()
        rclpy.shutdown()
        for child in children:
            child.send_signal(2)
        for child in children:
            child.wait(timeout=10)


def _timed_goal(client: Any, subtask: Any, wait_s: float = 30.0) -> float | None:
    """Milliseconds from sending a /subtask goal to its result, or None when the acceptance or the result did not
    come within `wait_s` (a lost goal)."""
    import threading

    from emmoe_interfaces.action import ExecuteSubtask

    started = time.perf_counter()
    done = threading.Event()
    future = client.send_goal_async(ExecuteSubtask.Goal(subtask=subtask))
    future.add_done_callback(lambda _: done.set())
    if not done.wait(wait_s) or future.result() is None or not future.result().accepted:
        return None
    done.clear()
    result_future = future.result().get_result_async()
    result_future.add_done_callback(lambda _: done.set())
    if not done.wait(wait_s):
        return None
    return (time.perf_counter() - started) * 1000


def _cases() -> dict[str, Any]:
    from emmoe_interfaces.msg import Subtask

    return {"End": Subtask(action="End", model="None"),
            "F2 check failure": Subtask(action="Pick", target="spaceship", model="RT-1-X"),
            "Pick with an instant skill": Subtask(action="Pick", target="apple", model="RT-1-X")}


def round_trip(count: int) -> dict[str, Any]:
    """/subtask round trips without skill simulation, each node in its own process as deployed.

    The scene comes from the test stand-in src/homiebot_executor/test/static_scene.py and the skill server answers
    at once (an instant scripted policy), so what is measured is the executor's own overhead: goal and result
    transport, the scene queries, the checks, routing and the skill action hop. Cases: End (no scene query), an F2
    check failure (one query), and a successful Pick (two queries, one skill action round trip).
    """
    timings: dict[str, list[float]] = {}
    with _subtask_stack() as client:
        for label, subtask in _cases().items():
            for _ in range(5):
                _timed_goal(client, subtask)
            answered = [_timed_goal(client, subtask) for _ in range(count)]
            timings[label] = [value for value in answered if value is not None]
    return {label: {"median_ms": round(statistics.median(values), 2), "p90_ms": round(percentile(values, 0.9), 2)}
            for label, values in timings.items()}


def _soak_goals(client: Any, count: int, label: str = "soak") -> tuple[list[float], int]:
    """Send `count` consecutive goals cycling through the round-trip cases; (answered round trips in ms, lost)."""
    cases = list(_cases().values())
    answered: list[float] = []
    lost = 0
    started = time.perf_counter()
    for index in range(count):
        value = _timed_goal(client, cases[index % len(cases)])
        if value is None:
            lost += 1
        else:
            answered.append(value)
        if (index + 1) % 1000 == 0:
            print(f"{label}: {index + 1}/{count} goals, {lost} lost, {time.perf_counter() - started:.0f} s",
                  file=sys.stderr, flush=True)
    return answered, lost


def soak(count: int) -> dict[str, Any]:
    """`count` consecutive /subtask goals cycling through the round-trip cases: how many were lost (no acceptance or
    no result within 30 s), the median, p99 and longest round trip of the answered ones, and how many warnings the
    executor logged (no monitor runs here: the executor checks each goal itself)."""
    started = time.perf_counter()
    with _subtask_stack() as client:
        answered, lost = _soak_goals(client, count)
        time.sleep(0.5)  # the last log lines reach the reader
        warnings = client.outputs["executor"].warnings
    return {"goals": count, "lost": lost, "median_ms": round(statistics.median(answered), 2),
            "p99_ms": round(percentile(answered, 0.99), 2), "max_ms": round(max(answered), 2),
            "executor_warnings": warnings, "wall_s": round(time.perf_counter() - started, 1)}


# How soon an executor told to stop must be gone.
STOP_LIMIT_S = 2.0


def stop_after_soak(executors: int, goals: int) -> dict[str, Any]:
    """`executors` executor nodes one after another against one scene stand-in and skill server: each serves `goals`
    goals, is sent SIGINT, and is timed until its process is gone (given up after 15 s)."""
    import signal

    stops: list[float | None] = []
    statuses: list[int | None] = []
    with _subtask_stack(with_executor=False) as client:
        for number in range(1, executors + 1):
            deadline = time.monotonic() + 10
            while client.server_is_ready() and time.monotonic() < deadline:  # the last executor's server is gone
                time.sleep(0.05)
            executor, output = _start_child(EXECUTOR_COMMAND)
            try:
                if not client.wait_for_server(timeout_sec=30):
                    raise RuntimeError("the executor's /subtask server did not appear:\n" + "\n".join(output.tail))
                _, lost = _soak_goals(client, goals, f"executor {number}")
                signalled = time.monotonic()
                executor.send_signal(signal.SIGINT)
                while executor.poll() is None and time.monotonic() - signalled < 15:
                    time.sleep(0.005)  # Popen.wait(timeout) polls up to 50 ms apart: too coarse a clock here
                gone = executor.poll() is not None
                stops.append(round(time.monotonic() - signalled, 3) if gone else None)
            finally:
                if executor.poll() is None:
                    executor.kill()
                    executor.wait()
            statuses.append(executor.returncode)
            stop = stops[-1]
            print(f"executor {number}: {goals} goals ({lost} lost), stopped "
                  f"{'after more than 15 s' if stop is None else f'{stop:.2f} s'} after SIGINT (exit status "
                  f"{executor.returncode})", file=sys.stderr, flush=True)
    timely = sum(1 for stop in stops if stop is not None and stop < STOP_LIMIT_S)
    return {"executors": executors, "goals_each": goals, "stopped_within_2_s": timely,
            "stop_s": stops, "max_stop_s": max((stop for stop in stops if stop is not None), default=None),
            "exit_statuses": statuses}


# A skill server whose policy answers at once (the /subtask overhead without any simulation).
INSTANT_SKILLS = """
from emmoe_core.ros_helpers import spin_node
from homiebot_executor.skill_servers import RobotClaim, SkillServerNode
from homiebot_executor.skills import SkillOutcome, SkillStatus
class Instant:
    def run(self, goal, should_cancel, progress):
        return SkillOutcome(SkillStatus.SUCCEEDED, held_object='')
spin_node(lambda: SkillServerNode('m3', Instant(), RobotClaim()), ready_line='instant skills ready')
"""


def main(argv: list[str] | None = None) -> int:
    """Run the chosen parts and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=6, help="apartments (seeds 0..N-1)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--episodes", type=int, default=3, help="episodes per apartment")
    parser.add_argument("--round-trip", action="store_true", help="measure the /subtask overhead instead")
    parser.add_argument("--count", type=int, default=50, help="round trips per case")
    parser.add_argument("--soak", type=int, default=0, metavar="N",
                        help="send N consecutive /subtask goals and count the lost ones instead (with --sigint: "
                             "goals per executor, default 1000)")
    parser.add_argument("--sigint", type=int, default=0, metavar="N",
                        help="N executors in turn, each sent SIGINT after its soak: how many stop within 2 s")
    parser.add_argument("--across", action="store_true", help="time Go to across the apartment instead")
    args = parser.parse_args(argv)
    if args.sigint:
        figures = stop_after_soak(args.sigint, args.soak or 1000)
        results: dict[str, Any] = {"stop_after_soak": figures}
    elif args.soak:
        figures = soak(args.soak)
        results = {"soak": figures}
    elif args.round_trip:
        figures = round_trip(args.count)
        results = {"round_trip": figures}
    elif args.across:
        figures = across_apartment(list(range(args.first_seed, args.first_seed + args.seeds)))
        results = {"across_apartment": figures}
    else:
        figures = skill_trials(list(range(args.first_seed, args.first_seed + args.seeds)), args.episodes)
        results = {"skills": {"seeds": args.seeds, "first_seed": args.first_seed, "episodes": args.episodes,
                              "per_skill": figures}}
    print(json.dumps(figures, indent=1))
    results = {**(json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}), **results}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
