"""`homiebot detector train|evaluate`: the learned detector (emmoe_core.perception.learned), from rendered views
(logic in homiebot.perception)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "train the learned detector on views rendered from the train tasks, or measure it on test-task views"

TRAIN_TASKS = range(1, 91)
TEST_TASKS = range(91, 101)
TRAIN_SEEDS = (1001, 1002, 1003)  # seeded variants of each train task's apartment, beside its own draw
TEST_SEEDS = (2001,)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `homiebot detector train` and `homiebot detector evaluate`."""
    stages = parser.add_subparsers(dest="stage", metavar="STAGE", required=True)
    train = stages.add_parser("train", help="render train-task views (resumable), then train (resumable)")
    evaluate = stages.add_parser("evaluate", help="render test-task views, then print and write the scores")
    for sub, views in ((train, "runs/detector/train_views"), (evaluate, "runs/detector/test_views")):
        sub.add_argument("--views", type=Path, default=Path(views), help="folder of the rendered shards "
                         "(default: %(default)s); shards already there are reused")
        sub.add_argument("--poses", type=int, help="robot poses per scene, four views each (default: "
                         "ViewSampling.poses_per_scene in homiebot.perception.views)")
    train.add_argument("--out", type=Path, default=Path("models/detector"),
                       help="weights folder to write (default: %(default)s)")
    train.add_argument("--steps", type=int, help="optimiser steps (default: TrainingConfig.steps in "
                       "homiebot.perception.training)")
    train.add_argument("--batch-size", type=int, help="crops per step (default: TrainingConfig.batch_size)")
    train.add_argument("--learning-rate", type=float, help="peak learning rate (default: "
                       "TrainingConfig.learning_rate)")
    train.add_argument("--init", type=Path, help="a weights folder to fine-tune instead of starting from random "
                       "weights (its classes must be these)")
    train.add_argument("--variants", type=int, default=len(TRAIN_SEEDS),
                       help="seeded variants of each train task's apartment (default: %(default)s)")
    evaluate.add_argument("--weights", type=Path, default=Path("models/detector"),
                          help="weights folder (default: %(default)s)")
    evaluate.add_argument("--report", type=Path, help="also write the scores as JSON here")


def run(args: argparse.Namespace) -> int:
    """Render what is missing, then train or evaluate."""
    from homiebot.cli import UsageError
    from homiebot.perception.views import ViewSampling, render_views

    if args.poses is not None and args.poses < 1:
        raise UsageError(f"--poses must be at least 1, got {args.poses}")
    sampling = ViewSampling() if args.poses is None else ViewSampling(poses_per_scene=args.poses)
    echo = lambda line: print(line, flush=True)  # noqa: E731
    if args.stage == "train":
        from habitat_bridge.catalog import OBJECT_KINDS

        from homiebot.perception.training import TrainingConfig, load_views, train_detector
        from homiebot.perception.views import catalog_classes

        if any(value is not None and value < 1 for value in (args.steps, args.batch_size)) or args.variants < 0:
            raise UsageError("--steps and --batch-size must be at least 1, --variants at least 0")
        if args.learning_rate is not None and not args.learning_rate > 0:
            raise UsageError(f"--learning-rate must be positive, got {args.learning_rate}")
        if args.init is not None and not (args.init / "config.json").is_file():
            raise UsageError(f"--init {args.init}: no weights there (config.json and model.safetensors)")
        given = {name: value for name, value in (("steps", args.steps), ("batch_size", args.batch_size),
                                                 ("learning_rate", args.learning_rate)) if value is not None}
        config = TrainingConfig(**given, init="" if args.init is None else str(args.init))
        seeds = (None, *range(TRAIN_SEEDS[0], TRAIN_SEEDS[0] + args.variants))
        shards = render_views(TRAIN_TASKS, seeds, args.views, sampling, echo)
        echo(f"[detector] loading {len(shards)} shards")
        card = train_detector(load_views(shards), catalog_classes(),
                              {name: kind.size for name, kind in OBJECT_KINDS.items()}, args.out,
                              config, echo)
        print(f"weights: {args.out} ({card['wall_minutes']} min of training on {card['views']} views)")
        return 0
    from emmoe_core.perception.network import NetworkLoadError

    from homiebot.perception.evaluation import evaluate_detector, report_lines

    shards = render_views(TEST_TASKS, (None, *TEST_SEEDS), args.views, sampling, echo)
    try:
        scores = evaluate_detector(args.weights, shards)
    except NetworkLoadError as error:
        raise UsageError(str(error)) from error
    for line in report_lines(scores):
        print(line)
    if args.report is not None:
        args.report.parent.mkdir(parents=True, exist_ok=True)
        args.report.write_text(json.dumps(scores, indent=2) + "\n")
    return 0
