"""Benchmark the embedded MuJoCo simulator (habitat_bridge) against its goals.

    python bench/bench_sim.py [--renders 100] [--physics-seconds 20] [--builds 10] [--resets 300]

Goals: four 256x256 RGB head views in at most 25 ms (median); physics at least 10x real time in the full apartment;
a scene built in under 1 s; 300 consecutive resets (each a different apartment, so each compiles a new model)
growing resident memory by less than 50 MB. Prints one line per figure and writes bench/results/sim.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import time
from pathlib import Path

from habitat_bridge import apartment, layout
from habitat_bridge.backends.base import VIEWS
from habitat_bridge.backends.mujoco_backend import MujocoBackend

RESULTS = Path(__file__).resolve().parent / "results" / "sim.json"


def rss_mb() -> float:
    """Resident set size of this process in MiB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def median_ms(samples: list[float]) -> float:
    """Median of seconds, in milliseconds."""
    return statistics.median(samples) * 1000


def bench_rendering(backend: MujocoBackend, count: int) -> dict[str, float]:
    """Median milliseconds of four RGB views, and of four views with depth and segmentation, in the apartment."""
    backend.observe(VIEWS)
    rgb, full = [], []
    for _ in range(count):
        start = time.perf_counter()
        backend.observe(VIEWS)
        rgb.append(time.perf_counter() - start)
    for _ in range(max(10, count // 4)):
        start = time.perf_counter()
        backend.observe(VIEWS, depth=True, segmentation=True)
        full.append(time.perf_counter() - start)
    return {"four_rgb_views_median_ms": median_ms(rgb), "four_rgb_views_p90_ms": 1000 * sorted(rgb)[int(0.9 * count)],
            "four_views_rgb_depth_segmentation_median_ms": median_ms(full)}


def bench_physics(backend: MujocoBackend, seconds: float) -> dict[str, float]:
    """Real-time factor while the robot drives and turns among the furniture and objects."""
    backend.set_base_velocity(0.3, 0.2)
    backend.step(0.5)
    start = time.perf_counter()
    simulated = 0.0
    while simulated < seconds:
        backend.step(0.5)
        simulated += 0.5
    wall = time.perf_counter() - start
    backend.set_base_velocity(0.0, 0.0)
    model = backend.model
    return {"physics_real_time_factor": simulated / wall, "physics_steps_per_second": simulated / model.opt.timestep
            / wall, "timestep_s": float(model.opt.timestep), "ngeom": int(model.ngeom), "nbody": int(model.nbody)}


def bench_build(backend: MujocoBackend, count: int) -> dict[str, float]:
    """Seconds to generate an apartment spec, and to load a new one into the backend (MJCF, compile, renderer
    rebind, settling), median over `count` seeds."""
    generate, load = [], []
    for seed in range(100, 100 + count):
        start = time.perf_counter()
        spec = layout.resolve_offsets(apartment.generate_apartment(seed))
        generate.append(time.perf_counter() - start)
        start = time.perf_counter()
        backend.reset(spec)
        load.append(time.perf_counter() - start)
    return {"generate_spec_median_s": statistics.median(generate), "load_scene_median_s": statistics.median(load),
            "load_scene_max_s": max(load),
            "build_total_median_s": statistics.median(g + b for g, b in zip(generate, load))}


def bench_resets(backend: MujocoBackend, count: int) -> dict[str, float]:
    """Resident memory growth over `count` resets cycling through 10 different apartments, one observation each."""
    specs = [layout.resolve_offsets(apartment.generate_apartment(seed)) for seed in range(10)]
    for spec in specs:  # warm-up: every code path and allocator arena once
        backend.reset(spec)
        backend.observe(VIEWS)
    gc.collect()
    before = rss_mb()
    curve = []
    start = time.perf_counter()
    for index in range(count):
        backend.reset(specs[index % len(specs)])
        backend.observe(VIEWS)
        if (index + 1) % 50 == 0:
            curve.append(round(rss_mb() - before, 1))
    elapsed = time.perf_counter() - start
    gc.collect()
    after = rss_mb()
    # A leak grows steadily; allocator arenas settle within the first resets and then wander.
    return {"resets": count, "rss_before_mb": before, "rss_after_mb": after, "rss_growth_mb": after - before,
            "rss_growth_every_50_resets_mb": curve, "reset_mean_s": elapsed / count}


def main() -> int:
    """Run the four measurements, print them against their goals, write the JSON results."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--renders", type=int, default=100, help="timed four-view renders")
    parser.add_argument("--physics-seconds", type=float, default=20.0, help="simulated seconds timed")
    parser.add_argument("--builds", type=int, default=10, help="different apartments built and timed")
    parser.add_argument("--resets", type=int, default=300, help="resets for the memory check")
    args = parser.parse_args()

    backend = MujocoBackend()
    results: dict[str, object] = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                              "mujoco_gl": os.environ.get("MUJOCO_GL", ""),
                                              "load_average": os.getloadavg()}}
    try:
        backend.reset(apartment.generate_apartment(0))
        results["rendering"] = bench_rendering(backend, args.renders)
        results["physics"] = bench_physics(backend, args.physics_seconds)
        results["build"] = bench_build(backend, args.builds)
        results["resets"] = bench_resets(backend, args.resets)
    finally:
        backend.close()

    rendering, physics, build, resets = (results[key] for key in ("rendering", "physics", "build", "resets"))
    checks = [
        ("four 256x256 RGB views, median", f"{rendering['four_rgb_views_median_ms']:.1f} ms", "<= 25 ms",
         rendering["four_rgb_views_median_ms"] <= 25),
        ("  with depth and segmentation, median", f"{rendering['four_views_rgb_depth_segmentation_median_ms']:.1f} ms",
         "(info)", True),
        ("physics real-time factor, full apartment", f"{physics['physics_real_time_factor']:.1f}x", ">= 10x",
         physics["physics_real_time_factor"] >= 10),
        ("scene build (generate + load), median", f"{build['build_total_median_s']:.3f} s", "< 1 s",
         build["build_total_median_s"] < 1.0),
        ("  of which load into MuJoCo, max", f"{build['load_scene_max_s']:.3f} s", "(info)", True),
        (f"RSS growth over {resets['resets']} resets", f"{resets['rss_growth_mb']:.1f} MB", "< 50 MB",
         resets["rss_growth_mb"] < 50),
    ]
    for label, value, goal, ok in checks:
        print(f"{label:<44} {value:>12}  goal {goal:<9} {'ok' if ok else 'MISSED'}")
    print(f"  RSS growth every 50 resets (MB): {resets['rss_growth_every_50_resets_mb']}")
    print(f"  load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    results["goals_met"] = all(ok for *_, ok in checks)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(f"written {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
