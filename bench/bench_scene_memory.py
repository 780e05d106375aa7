"""Resident memory of the bridge's simulator over 100 different scene loads (issue 40, item 6).

    python bench/bench_scene_memory.py [--scenes 100] [--warmup 5] [--threads 6] [--tracemalloc]
    python bench/bench_scene_memory.py --stack [--scenes 100]     # a real sim_stack process, driven over ROS 2

In-process (the default): loads the task scenes (data/train/*/scene.json, then data/test/*/scene.json) one after
another, each through the path a /sim/reset_episode request takes in the bridge (bridge_core.handle_reset on the
MuJoCo backend the bridge node creates), and after each load does what an episode's first moments do: a
/sim/get_observation (bridge_core.handle_get_observation: the four head views with segmentation and the visible
objects' locations) and a third-person video frame. As in sim_stack, whose executor spreads callbacks over six
threads, the calls are made from `--threads` worker threads in turn (a reset on one, the observation on the next,
...): glibc gives each thread its own malloc arena, and memory freed in one arena is not reused by the others, which a
single-threaded loop never shows (`--threads 1` measures that case).

`--stack` starts `sim_stack` (no_background, the parameter file `homiebot run` uses) on a domain of its own and sends
it the same resets and observations as ROS 2 service calls; the figures are then the sim_stack process's.

Prints the resident set size after a warm-up of `--warmup` loads (the last scenes of the measured ones, ending with
the same scene, so that both figures hold the same scene), after the measured loads, and the growth; the goal is less
than 50 MB over 100 different scenes. `--tracemalloc` (in-process) also prints the Python allocations that
grew the most. Writes bench/results/scene_memory.json (one entry per mode).
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import platform
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "scene_memory.json"
GOAL_MB = 50.0


def rss_mb(pid: int | None = None) -> float:
    """Resident set size of a process (default: this one) in MiB: psutil when installed, else /proc/<pid>/statm."""
    try:
        import psutil
    except ImportError:
        resident_pages = int(Path(f"/proc/{pid or 'self'}/statm").read_text().split()[1])
        return resident_pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    return float(psutil.Process(pid).memory_info().rss) / 2**20


def task_scenes(data: Path) -> list[Path]:
    """The task scenes: data/train/<n>/scene.json then data/test/<n>/scene.json, in numeric order."""
    scenes = []
    for split in ("train", "test"):
        folder = data / split
        tasks = [path for path in folder.iterdir() if (path / "scene.json").is_file()] if folder.is_dir() else []
        scenes += [path / "scene.json" for path in sorted(tasks, key=lambda path: (len(path.name), path.name))]
    return scenes


class Workers:
    """`count` threads that run the calls given to `run` in turn, one at a time (the caller waits for each), as the
    callbacks of a MultiThreadedExecutor land on its threads."""

    def __init__(self, count: int) -> None:
        self._queues: list[queue.Queue[Any]] = [queue.Queue() for _ in range(count)]
        self._next = 0
        for inbox in self._queues:
            threading.Thread(target=self._serve, args=(inbox,), daemon=True).start()

    @staticmethod
    def _serve(inbox: queue.Queue[Any]) -> None:
        while (job := inbox.get()) is not None:
            call, answer = job
            try:
                answer.put((True, call()))
            except BaseException as error:  # handed to the caller
                answer.put((False, error))

    def run(self, call: Callable[[], Any]) -> Any:
        """Run `call` on the next thread and return its result (or raise its exception)."""
        answer: queue.Queue[Any] = queue.Queue()
        self._queues[self._next].put((call, answer))
        self._next = (self._next + 1) % len(self._queues)
        ok, value = answer.get()
        if not ok:
            raise value
        return value

    def close(self) -> None:
        for inbox in self._queues:
            inbox.put(None)


@contextmanager
def in_process(image_size: int, threads: int) -> Iterator[tuple[Callable[[Path], None], int | None]]:
    """Yields (load(scene), None): the backend the bridge creates, in this process, driven through bridge_core's
    handlers."""
    from emmoe_interfaces.srv import GetObservation, ResetEpisode
    from habitat_bridge import bridge_core
    from habitat_bridge.backends import create_backend

    backend = create_backend("mujoco", image_width=image_size, image_height=image_size)
    third = bridge_core.video_views(backend.views).get("third")
    workers = Workers(threads)

    def load(scene: Path) -> None:
        request = ResetEpisode.Request(scene_path=str(scene), seed=-1)
        reset = workers.run(lambda: bridge_core.handle_reset(backend, request, ResetEpisode.Response()))
        if not reset.success:
            raise RuntimeError(f"{scene}: reset failed ({reset.error_code}): {reset.error_msg}")
        observation = workers.run(lambda: bridge_core.handle_get_observation(backend, GetObservation.Request(),
                                                                             GetObservation.Response()))
        if not observation.success:
            raise RuntimeError(f"{scene}: observation failed: {observation.error_msg}")
        if third is not None:
            workers.run(lambda: backend.observe([third]))

    try:
        yield load, None
    finally:
        workers.close()
        backend.close()


@contextmanager
def stack_loads() -> Iterator[tuple[Callable[[Path], None], int | None]]:
    """Yields (load(scene), pid): a sim_stack process on a leased domain, driven over ROS 2."""
    from emmoe_core.ros_domains import lease_domain

    with lease_domain() as lease:
        os.environ["ROS_DOMAIN_ID"] = str(lease.domain_id)
        import rclpy
        from emmoe_core.ros_helpers import call_service
        from emmoe_core.topics import GET_OBSERVATION_SERVICE, RESET_EPISODE_SERVICE
        from emmoe_interfaces.srv import GetObservation, ResetEpisode
        from homiebot.bringup import EMMOE_SIM_NODES, config_path, node_command
        from homiebot.sim_stack import READY_LINE
        from rclpy.executors import SingleThreadedExecutor

        spec = next(spec for spec in EMMOE_SIM_NODES if spec.name == "sim_stack")
        command = node_command(spec, config_path(), {"setting": "no_background"})
        stack = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        lines: collections.deque[str] = collections.deque(maxlen=40)
        assert stack.stdout is not None
        for line in stack.stdout:
            lines.append(line)
            if READY_LINE in line:
                break
        else:
            raise RuntimeError("sim_stack ended before it was ready:\n" + "".join(lines))
        threading.Thread(target=lines.extend, args=(stack.stdout,), daemon=True).start()
        rclpy.init()
        node = rclpy.create_node("scene_memory_bench")
        spinner = SingleThreadedExecutor()
        spinner.add_node(node)
        threading.Thread(target=spinner.spin, daemon=True).start()
        reset_client: Any = node.create_client(ResetEpisode, RESET_EPISODE_SERVICE)
        observe_client: Any = node.create_client(GetObservation, GET_OBSERVATION_SERVICE)

        def load(scene: Path) -> None:
            reset = call_service(reset_client, ResetEpisode.Request(scene_path=str(scene), seed=-1), 120)
            if not reset.ok or not reset.response.success:
                raise RuntimeError(f"{scene}: reset failed: {reset.message or reset.response.error_msg}")
            observation = call_service(observe_client, GetObservation.Request(), 120)
            if not observation.ok or not observation.response.success:
                raise RuntimeError(f"{scene}: observation failed: {observation.message}")

        try:
            yield load, stack.pid
        finally:
            spinner.shutdown()
            node.destroy_node()
            rclpy.try_shutdown()
            stack.send_signal(2)
            try:
                stack.wait(timeout=20)
            except subprocess.TimeoutExpired:
                stack.kill()
                stack.wait()


def main(argv: list[str] | None = None) -> int:
    """Measure and print; exit status 1 when the growth misses the goal."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="dataset folder (default: data/)")
    parser.add_argument("--scenes", type=int, default=100, help="different scenes loaded after the warm-up")
    parser.add_argument("--warmup", type=int, default=5, help="scenes loaded before the first measurement")
    parser.add_argument("--threads", type=int, default=6,
                        help="in-process: threads the calls rotate over (sim_stack's executor has 6)")
    parser.add_argument("--image-size", type=int, default=256, help="in-process: view width and height")
    parser.add_argument("--stack", action="store_true", help="measure a sim_stack process driven over ROS 2")
    parser.add_argument("--tracemalloc", action="store_true",
                        help="in-process: print the Python allocations that grew most")
    parser.add_argument("--results", type=Path, default=RESULTS, help="JSON file the figures are added to")
    args = parser.parse_args(argv)
    if args.scenes < 1 or args.warmup < 0 or args.threads < 1:
        parser.error("--scenes and --threads must be at least 1, --warmup at least 0")

    scenes = task_scenes(args.data)
    if not scenes:
        print(f"no scene.json under {args.data}/train or {args.data}/test", file=sys.stderr)
        return 2
    measured = [scenes[index % len(scenes)] for index in range(args.scenes)]
    # The warm-up ends with the scene the measured loads end with (the last of the 100), so that both figures are
    # taken with the same scene loaded: scenes differ by tens of MB in what they hold while loaded.
    warmup = [measured[(len(measured) - args.warmup + index) % len(measured)] for index in range(args.warmup)]
    mode = "sim_stack" if args.stack else f"in-process, {args.threads} thread{'s' * (args.threads > 1)}"
    print(f"{mode}: {len(warmup)} warm-up loads, then {len(measured)} loads of {len(set(measured))} different "
          "scenes", flush=True)
    curve: list[float] = []
    context = stack_loads() if args.stack else in_process(args.image_size, args.threads)
    with context as (load, pid):
        for scene in warmup:
            load(scene)
        gc.collect()
        if args.tracemalloc and not args.stack:
            import tracemalloc

            tracemalloc.start(10)
            snapshot = tracemalloc.take_snapshot()
        before = rss_mb(pid)
        start = time.perf_counter()
        for loads, scene in enumerate(measured, start=1):
            load(scene)
            if loads % 10 == 0 or loads == len(measured):
                curve.append(round(rss_mb(pid) - before, 1))
                print(f"  {loads:4d} loads: RSS {before + curve[-1]:.1f} MB ({curve[-1]:+.1f})", flush=True)
        elapsed = time.perf_counter() - start
        gc.collect()
        after = rss_mb(pid)
        if args.tracemalloc and not args.stack:
            print("Python allocations that grew most:")
            for stat in tracemalloc.take_snapshot().compare_to(snapshot, "traceback")[:10]:
                print(f"  {stat.size_diff / 1024:+.0f} KiB in {stat.count_diff:+d} blocks")
                for line in stat.traceback.format()[-6:]:
                    print(f"      {line}")

    growth = after - before
    ok = growth < GOAL_MB
    print(f"RSS after warm-up ({len(warmup)} loads): {before:.1f} MB")
    print(f"RSS after {len(measured)} loads of {len(set(measured))} different scenes: {after:.1f} MB")
    print(f"growth: {growth:+.1f} MB (goal < {GOAL_MB:.0f} MB) {'ok' if ok else 'MISSED'}")
    print(f"  mean load + render: {elapsed / len(measured):.2f} s; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs")
    entry = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                         "mujoco_gl": os.environ.get("MUJOCO_GL", ""), "load_average": os.getloadavg()},
             "warmup_loads": len(warmup), "loads": len(measured), "different_scenes": len(set(measured)),
             "rss_after_warmup_mb": round(before, 1), "rss_after_mb": round(after, 1),
             "rss_growth_mb": round(growth, 1), "rss_growth_every_10_loads_mb": curve,
             "load_and_render_mean_s": round(elapsed / len(measured), 3), "goal_met": ok}
    results = json.loads(args.results.read_text()) if args.results.is_file() else {}
    results[mode] = entry
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(results, indent=1) + "\n")
    print(f"written {args.results}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
