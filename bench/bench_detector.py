"""Benchmark of the learned detector's inference (emmoe_core.perception.learned) on this machine's CPU.

Renders one look of the MuJoCo apartment (the four 256x256 head views with depth) from a few robot poses, then times
the detector on them: the network alone (one pass over the four views) and the whole look (network, regions, depth
clean-up, tracks), as the skills and the bridge call it. The goal: under 50 ms for the four views.

    python bench/bench_detector.py                       # committed weights, 2 threads, 30 repeats
    python bench/bench_detector.py --weights runs/detector/w --threads 1
Results go to bench/results/detector.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "detector.json"


def looks(count: int) -> list:
    """`count` observations of task 91's apartment from poses spread over it."""
    from habitat_bridge.backends.mujoco_backend import MujocoBackend
    from habitat_bridge.scene_spec import SceneSpec
    from homiebot.benchmark_tasks import DEFAULT_DEFINITIONS, scene_for
    from homiebot.task_definitions import load_all

    backend = MujocoBackend()
    try:
        backend.reset(SceneSpec.from_dict(scene_for(load_all(DEFAULT_DEFINITIONS)[91])))
        x, y, _ = backend.robot_state().base.position
        observations = []
        for index in range(count):
            backend.teleport_base(x, y, index * 6.283 / count)
            observations.append(backend.observe(depth=True))
        return observations
    finally:
        backend.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--weights", type=Path, default=None, help="weights folder (default: models/detector)")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads (default: %(default)s)")
    parser.add_argument("--repeats", type=int, default=30, help="timed looks (default: %(default)s)")
    args = parser.parse_args()
    import torch
    from emmoe_core.perception.learned import DEFAULT_WEIGHTS, LearnedDetector

    detector = LearnedDetector(args.weights or DEFAULT_WEIGHTS, threads=args.threads)
    observations = looks(6)
    for observation in observations[:2]:  # warm-up
        detector.label_views(observation)
    network, whole = [], []
    for index in range(args.repeats):
        observation = observations[index % len(observations)]
        start = time.perf_counter()
        detector.label_views(observation)
        network.append(1000 * (time.perf_counter() - start))
        observation.time = float(index)  # a new look: the detector's cache does not answer it
        start = time.perf_counter()
        detector.regions(observation)
        whole.append(1000 * (time.perf_counter() - start))
    parameters = sum(tensor.numel() for tensor in detector.network.parameters())
    result = {"threads": args.threads, "torch_threads": torch.get_num_threads(), "parameters": parameters,
              "views": len(observations[0].rgb), "image": list(observations[0].rgb["front"].shape[:2]),
              "network_ms_median": round(statistics.median(network), 1),
              "network_ms_p90": round(sorted(network)[int(0.9 * len(network))], 1),
              "look_ms_median": round(statistics.median(whole), 1),
              "look_ms_p90": round(sorted(whole)[int(0.9 * len(whole))], 1), "goal_ms": 50}
    for key, value in result.items():
        print(f"{key:20} {value}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
