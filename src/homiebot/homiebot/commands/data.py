"""`homiebot data build|paraphrase|dagger`: planner training data from EMMOE trajectories.

The logic lives in homiebot_planner.training (build, paraphrase); this module only parses arguments.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "build SFT/DPO planner training data from EMMOE trajectories, or paraphrase its texts"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `homiebot data build` and `homiebot data paraphrase`."""
    actions = parser.add_subparsers(dest="data_action", metavar="ACTION", required=True)

    build = actions.add_parser("build", help="write sft_<split>.json, dpo_<split>.json and Hugging Face datasets",
                               description="Convert DATA_DIR/<split>/<id>/info.txt trajectories (and their images) "
                                           "into SFT and DPO training data (EMMOE.md section 6).")
    build.add_argument("--data", required=True, type=Path, help="folder holding <split>/<task_id>/info.txt")
    build.add_argument("--split", default="train", help="split folder to read (default: train)")
    build.add_argument("--out", required=True, type=Path, help="output folder (image paths are written relative to it)")
    build.add_argument("--paraphrases", type=Path, help="paraphrase file from `homiebot data paraphrase` to add "
                                                        "rewritten variants of every trajectory")
    build.add_argument("--no-images", dest="images", action="store_false",
                       help="text-only samples: no image lists, no <image> tokens, images need not exist")
    build.add_argument("--prompt-style", choices=("release", "planner", "planner_names"), default="release",
                       help="human turns as in the released SFT data (default) or as the run-time planner writes them, "
                            "with the visible objects per view and where the small ones rest (text-only planners; "
                            "needs `homiebot collect` output); planner_names: the visible names only (HomieBot-135M "
                            "v0.3, planner setting object_locations=false)")
    build.add_argument("--answers", dest="answer_style", choices=("analysis", "decision"), default="analysis",
                       help="SFT answers with the Analysis line (default, the paper's) or the decision only (Subtask "
                            "and Model, as DPO answers are): for small planners, which then plan without an Analysis")
    build.add_argument("--without-failures", dest="designed_failures", action="store_false",
                       help="leave the failed blocks out of every trajectory (no designed failures, no re-plans after "
                            "them; the rest renumbered): the ablation of training on clean demonstrations only")
    build.add_argument("--no-hf", dest="hf_datasets", action="store_false",
                       help="skip the Hugging Face datasets (write only the JSON files)")

    dagger = actions.add_parser("dagger", help="aggregate on-policy rows (`homiebot collect --dagger`) of every "
                                               "round with SFT datasets into one training dataset",
                                description="One Hugging Face SFT dataset from the on-policy rows of every round (the "
                                            "student's prompts with the re-planning expert's answers) and the "
                                            "given SFT datasets; `homiebot train --data` takes it.")
    dagger.add_argument("--rows", required=True, type=Path, nargs="+",
                        help="row folders (<round>/rows) or packed rounds (*.jsonl.gz, see --pack)")
    dagger.add_argument("--sft", type=Path, nargs="*", default=[], help="SFT datasets to add (hf/sft_train)")
    dagger.add_argument("--sft-fraction", type=float, default=1.0,
                        help="share of the SFT rows kept, drawn with --seed (default 1: all)")
    dagger.add_argument("--seed", type=int, default=0, help="seed of the --sft-fraction draw (default 0)")
    dagger.add_argument("--focus", default="all",
                        help="on-policy rows kept: all (default) or recovery: states after a failed step, End "
                             "answered by the student or the oracle, and states where the student already agreed "
                             "(its other choices after a success are left out)")
    dagger.add_argument("--out", required=True, type=Path, help="dataset folder to write")
    dagger.add_argument("--pack", type=Path, help="also write the rows of the --rows folders (the new round; packed "
                                                  "rounds given are not repeated), one per step, to this gzip "
                                                  "JSON-lines file (small enough to commit: how a round is kept)")

    paraphrase = actions.add_parser("paraphrase", help="rewrite task texts and analyses through an "
                                                       "OpenAI-compatible server (cached)",
                                    description="Rewrite every task instruction and analysis N times, object names "
                                                "kept, through any OpenAI-compatible chat server; responses are cached "
                                                "on disk so reruns send no request.")
    paraphrase.add_argument("--data", required=True, type=Path, help="folder holding <split>/<task_id>/info.txt")
    paraphrase.add_argument("--split", default="train", help="split folder to read (default: train)")
    paraphrase.add_argument("--out", required=True, type=Path, help="paraphrase file to write (JSON)")
    paraphrase.add_argument("--base-url", required=True, help="server endpoint, e.g. http://127.0.0.1:8000/v1")
    paraphrase.add_argument("--model", required=True, help="model name on the server (the paper used gpt-4o)")
    paraphrase.add_argument("--rewrites", type=int, default=3, help="rewrites per text (default: 3, as the paper)")
    paraphrase.add_argument("--api-key-env", default="OPENAI_API_KEY",
                            help="environment variable holding the API key (default: OPENAI_API_KEY)")
    paraphrase.add_argument("--cache", type=Path, help="response cache folder (default: <out folder>/paraphrase_cache)")
    paraphrase.add_argument("--temperature", type=float, default=0.9, help="sampling temperature (default: 0.9)")
    paraphrase.add_argument("--workers", type=int, default=4, help="requests in flight (default: 4)")
    paraphrase.add_argument("--max-attempts", type=int, default=3,
                            help="requests per text before accepting fewer rewrites (default: 3)")


def run(args: argparse.Namespace) -> int:
    """Run the chosen action; user mistakes and malformed data become one-line errors."""
    from homiebot.cli import UsageError
    from homiebot_planner.training.paraphrase import ParaphraseError
    from homiebot_planner.training.trajectory import TrajectoryError

    try:
        if args.data_action == "build":
            return _build(args)
        if args.data_action == "dagger":
            return _dagger(args)
        return _paraphrase(args)
    except (ValueError, TrajectoryError, ParaphraseError) as error:
        raise UsageError(str(error)) from error


def _build(args: argparse.Namespace) -> int:
    from homiebot_planner.training.build import BuildConfig, build_datasets

    config = BuildConfig(data_dir=args.data, out_dir=args.out, split=args.split, paraphrases=args.paraphrases,
                         images=args.images, hf_datasets=args.hf_datasets, prompt_style=args.prompt_style,
                         designed_failures=args.designed_failures, answer_style=args.answer_style)
    counts = build_datasets(config)
    for line in counts.summary_lines():
        print(line)
    print(f"wrote {args.out / f'sft_{args.split}.json'}, {args.out / f'dpo_{args.split}.json'}"
          + (f" and {args.out / 'hf'}/" if args.hf_datasets else ""))
    return 0


def _dagger(args: argparse.Namespace) -> int:
    from homiebot_planner.training.dagger_rows import pack_rows, write_aggregate

    folders = [path for path in args.rows if path.is_dir()]
    if args.pack and not folders:
        raise ValueError("--pack packs the rows of --rows folders, and none was given")
    written, counts = write_aggregate(args.rows, args.sft, args.out, args.sft_fraction, args.seed, args.focus)
    print(counts.summary())
    if args.pack:
        print(f"packed {pack_rows(folders, args.pack)} on-policy rows into {args.pack}")
    print(f"wrote {written} rows ({written - counts.rows} from SFT datasets) to {args.out}")
    return 0


def _paraphrase(args: argparse.Namespace) -> int:
    from homiebot_planner.training.paraphrase import ParaphraseConfig, paraphrase_split

    config = ParaphraseConfig(base_url=args.base_url, model=args.model, rewrites=args.rewrites,
                              cache_dir=args.cache or args.out.parent / "paraphrase_cache",
                              api_key_env=args.api_key_env, temperature=args.temperature, workers=args.workers,
                              max_attempts=args.max_attempts)
    report = paraphrase_split(args.data, args.split, args.out, config)
    for line in report.summary_lines():
        print(line)
    print(f"wrote {args.out}")
    return 0
