"""Benchmark: the planner training pipeline on CPU (data build at EMMOE-100 train scale, tiny-model step times).

    python bench/bench_training.py [--tasks 90] [--no-images] [--text-steps 20] [--vlm-steps 5] [--threads 1]

1. Writes `--tasks` synthetic trajectories in the official layout (about 11 blocks each, one failure and its
   re-plan per task, four 256x256 PNGs per block unless --no-images) and times `build_datasets` without and
   with the Hugging Face datasets; prints the counts and the size of the saved datasets.
2. Times optimiser steps of the tiny models on this machine's CPU: text Llama SFT (batch 4) and DPO (batch 4),
   tiny LLaVA SFT with four images per sample (batch 2).

Writes bench/results/training.json. These figures are for the pipeline's overhead; real 7B training needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import tempfile
import time
from pathlib import Path

from homiebot_planner.training.build import BuildConfig, build_datasets
from homiebot_planner.training.config import TrainConfig
from homiebot_planner.training.tiny import build_tiny_text_model, build_tiny_vlm
from homiebot_planner.training.trainer import run_training

OBJECTS = ["apple", "bowl", "green_can", "sugar_box", "banana", "mug"]
PLACES = ["fridge", "kitchen_counter", "sink", "brown_table", "sofa", "tv_stand"]
VIEWS = ("front", "left", "back", "right")


def synthetic_info(rng: random.Random) -> str:
    """An info.txt of 2-3 fetch-and-place rounds, one failed Pick re-planned, ending in End."""
    blocks: list[tuple[str, str, str]] = []  # (head, feedback, inventory)
    for round_number in range(rng.randint(2, 3)):
        item, source, goal = rng.choice(OBJECTS), rng.choice(PLACES), rng.choice(PLACES)
        blocks.append((f"[Go to, {source}] (NoMaD)", "None", "None"))
        if round_number == 0:
            blocks.append((f"[Pick, {item}] (RT-1-X)", "Unable to pick, the target is far away", "None"))
            blocks.append((f"[Go to, {item}] (PixNav)", "None", "None"))
        blocks.append((f"[Pick, {item}] (RT-1-X)", "None", item))
        blocks.append((f"[Go to, {goal}] (NoMaD)", "None", item))
        blocks.append((f"[Put, {item}, {goal}] (RT-1-X)", "None", "None"))
    lines = [f"Task: move things around the {rng.choice(PLACES)}", ""]
    for number, (head, feedback, inventory) in enumerate(blocks, start=1):
        lines += [f"Subtask{number}: {head}", f"Analysis: step {number} of the plan, {head.split(']')[0][1:]}.",
                  f"Feedback: {feedback}", f"Inventory: {inventory}", ""]
    lines += [f"Subtask{len(blocks) + 1}: [End]", "Analysis: everything is in place.", "Feedback: None",
              "Inventory: None", ""]
    return "\n".join(lines)


def write_dataset(root: Path, tasks: int, images: bool) -> None:
    from PIL import Image

    rng = random.Random(0)
    for task_id in range(1, tasks + 1):
        folder = root / "data" / "train" / str(task_id)
        folder.mkdir(parents=True)
        info = synthetic_info(rng)
        (folder / "info.txt").write_text(info, encoding="utf-8")
        if images:
            for number in range(1, info.count("\nSubtask") + 1):
                for view_index, view in enumerate(VIEWS):
                    Image.new("RGB", (256, 256), (40 * view_index, 5 * number, 200)).save(
                        folder / f"subtask{number}_{view}.png")


def folder_size(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def seconds_per_step(config: TrainConfig) -> tuple[float, float]:
    """(seconds per optimiser step, first -> last loss drop) of one run."""
    result = run_training(config)
    return result.runtime_s / result.steps, result.losses[0][1] - result.losses[-1][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=90, help="synthetic trajectories (EMMOE-100 train: 90)")
    parser.add_argument("--no-images", dest="images", action="store_false", help="text-only build")
    parser.add_argument("--text-steps", type=int, default=20, help="tiny text model steps per stage")
    parser.add_argument("--vlm-steps", type=int, default=5, help="tiny LLaVA SFT steps")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (tiny models: 1 is fastest)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    results: dict[str, object] = {"machine": platform.processor() or platform.machine(), "tasks": args.tasks,
                                  "images": args.images, "threads": args.threads}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "EMMOE-100"
        write_dataset(root, args.tasks, args.images)
        started = time.perf_counter()
        counts = build_datasets(BuildConfig(data_dir=root / "data", out_dir=root / "json", images=args.images,
                                            hf_datasets=False))
        json_s = time.perf_counter() - started
        started = time.perf_counter()
        build_datasets(BuildConfig(data_dir=root / "data", out_dir=root, images=args.images))
        full_s = time.perf_counter() - started
        build = {"counts": counts.to_json(), "json_only_s": round(json_s, 3), "with_hf_datasets_s": round(full_s, 3),
                 "hf_datasets_mb": round(folder_size(root / "hf") / 2**20, 1)}
        results["build"] = build
        print(*counts.summary_lines(), sep="\n")
        print(f"build: JSON only {json_s:.2f} s, with Hugging Face datasets {full_s:.2f} s, "
              f"datasets {build['hf_datasets_mb']} MB")

        corpus = [json.dumps(sample) for sample in json.loads((root / "sft_train.json").read_text())[:200]]
        text_model = build_tiny_text_model(Path(scratch) / "text", corpus)
        common = {"data": root, "batch_size": 4, "learning_rate": 5e-3, "logging_steps": 1, "device": "cpu"}
        stages = [("text_sft", "sft", text_model, args.text_steps, 4),
                  ("text_dpo", "dpo", Path(scratch) / "text_sft", args.text_steps, 4)]
        if args.images:
            stages.append(("vlm_sft", "sft", build_tiny_vlm(Path(scratch) / "vlm", corpus), args.vlm_steps, 2))
        training: dict[str, float] = {}
        for name, stage, model, steps, batch in stages:
            config = TrainConfig.from_preset(stage, model=model, output_dir=Path(scratch) / name, max_steps=steps,
                                             **{**common, "batch_size": batch})
            per_step, drop = seconds_per_step(config)
            training[f"{name}_s_per_step"], training[f"{name}_loss_drop"] = round(per_step, 4), round(drop, 4)
            print(f"{name}: {per_step:.3f} s/step (batch {batch}), loss drop {drop:.3f}")
        results["training"] = training
    out = Path(__file__).parent / "results" / "training.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
