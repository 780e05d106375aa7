"""`homiebot train sft|dpo`: LoRA training of the planner with trl (logic in homiebot_planner.training)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "train the planner: LoRA SFT or DPO with the paper's presets (trl + peft)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `homiebot train sft` and `homiebot train dpo`; unset options take the stage's preset."""
    stages = parser.add_subparsers(dest="stage", metavar="STAGE", required=True)
    for stage, description in (("sft", "stage 1, supervised fine-tuning (preset: LoRA r=128, alpha=256, lr 5e-4)"),
                               ("dpo", "stage 2, direct preference optimisation (preset: LoRA r=8, alpha=8, "
                                       "lr 5e-6, beta 0.1)")):
        sub = stages.add_parser(stage, help=description, description=description + "; 1 epoch, global batch 16, "
                                "cosine schedule, 3% warm-up, max length 2048. Several GPUs: `accelerate launch "
                                "--num_processes N -m homiebot.cli train ...` (the global batch is split over them).")
        sub.add_argument("--model", required=True, type=Path,
                         help="local model folder (base model for sft, the sft checkpoint for dpo)")
        sub.add_argument("--data", required=True, type=Path, help="folder written by `homiebot data build`")
        sub.add_argument("--output", required=True, type=Path, help="checkpoint folder to write")
        sub.add_argument("--split", default="train", help="built split to train on (default: train)")
        sub.add_argument("--lora-r", type=int, help="LoRA rank")
        sub.add_argument("--lora-alpha", type=int, help="LoRA alpha")
        sub.add_argument("--lora-dropout", type=float, help="LoRA dropout (default 0.05)")
        sub.add_argument("--lr", dest="learning_rate", type=float, help="peak learning rate")
        sub.add_argument("--epochs", type=float, help="epochs (default 1)")
        sub.add_argument("--batch-size", type=int, help="global batch size (default 16)")
        sub.add_argument("--per-device-batch-size", type=int,
                         help="samples per device and step; the rest of the global batch is gradient accumulation")
        sub.add_argument("--max-length", type=int, help="maximum tokens per sample, images included (default 2048)")
        sub.add_argument("--max-steps", type=int, help="stop after this many optimiser steps")
        sub.add_argument("--warmup-ratio", type=float, help="warm-up fraction (default 0.03)")
        sub.add_argument("--scheduler", dest="lr_scheduler", help="learning-rate schedule (default cosine)")
        sub.add_argument("--optim", help="optimiser name (default adamw_torch; e.g. paged_adamw_32bit)")
        sub.add_argument("--load-in-4bit", action="store_true", default=None,
                         help="quantise the frozen base to 4-bit NF4 (QLoRA, as the paper; needs bitsandbytes)")
        sub.add_argument("--save", choices=("merged", "adapter"),
                         help="merged: full merged model at the root + adapter/ (default); adapter: adapter only")
        sub.add_argument("--system-prompt", choices=("planner", "none"), default="planner",
                         help="system turn of every sample: the planner's own system prompt (default, so training "
                              "matches inference) or none")
        sub.add_argument("--system-prompt-file", type=Path, help="text file with another system prompt to use")
        sub.add_argument("--no-images", dest="images", action="store_false", default=None,
                         help="train a vision-language model on text only")
        sub.add_argument("--device", choices=("auto", "cpu", "cuda"), help="where to train (default auto)")
        sub.add_argument("--cpu-bf16", action="store_true", default=None,
                         help="bfloat16 autocast on the CPU (about 1.5x faster on CPUs with AMX or AVX-512 BF16)")
        sub.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=None,
                         help="trade compute for memory (default: on with a GPU, off on CPU)")
        sub.add_argument("--validation-tasks", type=lambda text: tuple(item.strip() for item in text.split(",")
                                                                     if item.strip()),
                         help="comma-separated train task ids held out (with their variants) for the validation loss")
        sub.add_argument("--eval-steps", type=int, help="measure the validation loss every N steps (default: at the end)")
        sub.add_argument("--save-steps", type=int,
                         help="resumable checkpoint every N steps; rerunning the command continues from the last one")
        sub.add_argument("--adapter-dtype", choices=("float32", "float16"),
                         help="precision of the saved LoRA weights (default float32; float16 halves the file)")
        sub.add_argument("--seed", type=int, help="random seed (default 42)")
        sub.add_argument("--logging-steps", type=int, help="log the loss every N steps (default 10)")
        if stage == "sft":
            sub.add_argument("--subtask-weight", type=float,
                             help="text LMs: weight of the answer's [action, object] tokens in the loss (default 1)")
        if stage == "dpo":
            sub.add_argument("--beta", type=float, help="DPO beta (default 0.1)")


def run(args: argparse.Namespace) -> int:
    """Train one stage and print where the checkpoint is."""
    from dataclasses import replace

    from homiebot.cli import UsageError
    from homiebot_planner.training.config import TrainConfig, TrainingSetupError
    from homiebot_planner.training.trainer import planner_system_prompt, run_training

    settings = {name: getattr(args, name, None) for name in (
        "split", "lora_r", "lora_alpha", "lora_dropout", "learning_rate", "epochs", "batch_size",
        "per_device_batch_size", "max_length", "max_steps", "warmup_ratio", "lr_scheduler", "optim", "load_in_4bit",
        "save", "images", "device", "cpu_bf16", "gradient_checkpointing", "seed", "logging_steps", "beta",
        "validation_tasks", "eval_steps", "save_steps", "adapter_dtype", "subtask_weight")}
    try:
        config = TrainConfig.from_preset(args.stage, model=args.model, data=args.data, output_dir=args.output,
                                         **settings)
        if args.system_prompt_file is not None:
            config = replace(config, system_prompt=args.system_prompt_file.read_text(encoding="utf-8"))
        elif args.system_prompt == "planner":
            config = replace(config, system_prompt=planner_system_prompt(config.model, config.images))
    except OSError as error:
        raise UsageError(f"--system-prompt-file {args.system_prompt_file}: {error.strerror}") from error
    except ValueError as error:  # TrainConfig's checks and TrainingSetupError
        raise UsageError(str(error)) from error
    try:
        result = run_training(config)
    except TrainingSetupError as error:
        raise UsageError(str(error)) from error
    if not result.main_process:  # the other processes of a distributed run stay quiet
        return 0
    if result.losses:
        first, last = result.losses[0], result.losses[-1]
        print(f"{args.stage}: {result.rows} rows, {result.steps} steps in {result.runtime_s:.1f} s; loss "
              f"{first[1]:.4f} (step {first[0]}) -> {last[1]:.4f} (step {last[0]})")
    print(f"checkpoint: {result.output_dir} (model card: {result.output_dir / 'README.md'})")
    return 0
