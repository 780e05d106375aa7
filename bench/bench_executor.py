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

    python bench/bench_executor.py --seeds 10            # skill rates (about 1 s per trial)
    python bench/bench_executor.py --round-trip          # /subtask overhead
    python bench/bench_executor.py --soak 10000          # 10,000 consecutive goals: lost count, p99
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


@contextmanager
def _subtask_stack() -> Iterator[Any]:
    """The executor node, the static scene stand-in and an instant skill server, each in its own process as
    deployed, and an ActionClient on /subtask spun by a thread of this process."""
    import os
    import subprocess
    import threading

    import rclpy
    from emmoe_eval.action_client import ActionClient
    from emmoe_interfaces.action import ExecuteSubtask
    from rclpy.executors import SingleThreadedExecutor

    os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))  # Linux-valid DDS domain ids
    static_scene = Path(__file__).resolve().parents[1] / "src" / "homiebot_executor" / "test" / "static_scene.py"
    children = [subprocess.Popen([sys.executable, *command], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                 text=True)
                for command in ((str(static_scene),), ("-m", "homiebot_executor.executor_node"))]
    children.append(subprocess.Popen([sys.executable, "-c", INSTANT_SKILLS], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True))
    for child in children:
        assert child.stdout is not None
        child.stdout.readline()
        # Keep reading: a child whose output pipe is full blocks in its next log line (the executor logs one warning
        # per goal here, as no monitor runs), and its goals then stop being answered.
        threading.Thread(target=collections.deque, args=(child.stdout, 0), daemon=True).start()  # read, discard
    rclpy.init()
    client_node = rclpy.create_node("bench_client")
    spinner = SingleThreadedExecutor()
    spinner.add_node(client_node)
    threading.Thread(target=spinner.spin, daemon=True).start()
    client: Any = ActionClient(client_node, ExecuteSubtask, "/subtask")
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


def soak(count: int) -> dict[str, Any]:
    """`count` consecutive /subtask goals cycling through the round-trip cases: how many were lost (no acceptance or
    no result within 30 s), and the median, p99 and longest round trip of the answered ones."""
    cases = list(_cases().values())
    answered: list[float] = []
    lost = 0
    started = time.perf_counter()
    with _subtask_stack() as client:
        for index in range(count):
            value = _timed_goal(client, cases[index % len(cases)])
            if value is None:
                lost += 1
            else:
                answered.append(value)
            if (index + 1) % 1000 == 0:
                print(f"soak: {index + 1}/{count} goals, {lost} lost, {time.perf_counter() - started:.0f} s",
                      file=sys.stderr, flush=True)
    return {"goals": count, "lost": lost, "median_ms": round(statistics.median(answered), 2),
            "p99_ms": round(percentile(answered, 0.99), 2), "max_ms": round(max(answered), 2),
            "wall_s": round(time.perf_counter() - started, 1)}


# A skill server whose policy answers at once (the /subtask overhead without any simulation).
INSTANT_SKILLS = """
import rclpy
from rclpy.executors import MultiThreadedExecutor
from homiebot_executor.skill_servers import RobotClaim, SkillServerNode
from homiebot_executor.skills import SkillOutcome, SkillStatus
class Instant:
    def run(self, goal, should_cancel, progress):
        return SkillOutcome(SkillStatus.SUCCEEDED, held_object='')
rclpy.init()
node = SkillServerNode('m3', Instant(), RobotClaim())
executor = MultiThreadedExecutor()
executor.add_node(node)
print('instant skills ready', flush=True)
try:
    executor.spin()
except KeyboardInterrupt:
    pass
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
                        help="send N consecutive /subtask goals and count the lost ones instead")
    parser.add_argument("--across", action="store_true", help="time Go to across the apartment instead")
    args = parser.parse_args(argv)
    if args.soak:
        figures = soak(args.soak)
        results: dict[str, Any] = {"soak": figures}
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
