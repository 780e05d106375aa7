"""`homiebot data build`: a split of EMMOE trajectories to the SFT and DPO training files.

Reads `DATA_DIR/<split>/<task_id>/info.txt` (+ `subtask{n}_{front,left,back,right}.png`) and writes to OUT:

* `sft_<split>.json`: the release's LLaVA / Video-LLaVA layout, a JSON list of
  `{"id": "<task>_<step>", "image": [front, left, back, right],
    "conversations": [{"from": "human", "value": "<image><image><image><image>\\n<human turn>"},
                      {"from": "gpt", "value": "<answer>"}]}`.
  Image paths are relative to OUT (pass OUT as the trainer's image folder, as the release passes `EMMOE-100/`);
  with `images=False` the `image` key and the `<image>` tokens are left out.
* `dpo_<split>.json`: a JSON list of `{"prompt", "chosen", "rejected"}` (text only, as released).
* `hf/sft_<split>`: a Hugging Face dataset (save_to_disk) with `id, task_id, variant, step, messages` and, with
  images, `images` (the four PNGs embedded); `messages` is `[{"role": "user", "content": <human turn>},
  {"role": "assistant", "content": <answer>}]` (trl inserts the image placeholders before the user text).
* `hf/dpo_<split>`: `id, task_id, kind, prompt, chosen, rejected` in trl's conversational preference form.
* `counts_<split>.json`: the counts below (the model card reads them).

With a paraphrase file (`homiebot data paraphrase`), every trajectory also yields one variant per rewrite, with
the rewritten task text and analyses; SFT and DPO rows are built from every variant.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from emmoe_eval.dataset import is_test_task

from homiebot_planner.training.paraphrase import apply_rewrite, load_paraphrases
from homiebot_planner.training.samples import (
    ANSWER_STYLES,
    DPO_KINDS,
    PROMPT_STYLES,
    DpoRow,
    SftSample,
    dpo_rows,
    sft_samples,
)
from homiebot_planner.training.trajectory import Trajectory, TrajectoryError, find_trajectories, read_trajectory

IMAGE_TOKEN = "<image>"


@dataclass(frozen=True)
class BuildConfig:
    """What `build_datasets` reads and writes.

    Attributes:
        data_dir: the folder holding `<split>/<task_id>/info.txt` (EMMOE-100/data in the official layout).
        out_dir: where the files go (created if missing).
        split: the split folder to read (`train` or `test` in EMMOE-100).
        paraphrases: a file written by `homiebot data paraphrase` for this split, or None.
        images: whether samples carry the four observations (each must exist).
        hf_datasets: whether to write the Hugging Face datasets too.
        prompt_style: "release" (the released SFT data's human turn) or "planner" (the run-time planner's user
            message with the visible objects per view, from the collected visible.json; for text-only planners).
        answer_style: the SFT answers' shape, "analysis" (the paper's) or "decision" (Subtask and Model only).
        designed_failures: whether the failed blocks (the designed failures and their re-plans) stay in the
            trajectories; False builds from `Trajectory.without_failures` (an ablation: clean demonstrations only).
    """

    data_dir: Path
    out_dir: Path
    split: str = "train"
    paraphrases: Path | None = None
    images: bool = True
    hf_datasets: bool = True
    prompt_style: str = "release"
    designed_failures: bool = True
    answer_style: str = "analysis"

    def __post_init__(self) -> None:
        if self.answer_style not in ANSWER_STYLES:
            raise ValueError(f"answer style must be one of {', '.join(ANSWER_STYLES)}, not {self.answer_style!r}")
        if self.prompt_style not in PROMPT_STYLES:
            raise ValueError(f"prompt style must be one of {', '.join(PROMPT_STYLES)}, not {self.prompt_style!r}")
        if not self.split or "/" in self.split or "\\" in self.split or self.split in (".", ".."):
            raise ValueError(f"split must be a folder name such as 'train' or 'test', not {self.split!r}")
        if not Path(self.data_dir).is_dir():
            raise ValueError(f"--data {self.data_dir}: no such folder (expected DATA_DIR/{self.split}/<id>/info.txt)")
        if self.paraphrases is not None and not Path(self.paraphrases).is_file():
            raise ValueError(f"--paraphrases {self.paraphrases}: no such file")


@dataclass
class BuildCounts:
    """How much data a build produced.

    Attributes:
        split: the split read.
        prompt_style: the human-turn layout (PROMPT_STYLES).
        trajectories: info.txt files read.
        variants: text variants per trajectory (1 + number of rewrites).
        steps: Subtask blocks over all trajectories (original text only).
        failed_steps: blocks whose feedback is an error (original text only).
        sft: SFT samples written (all variants).
        dpo: DPO rows written per kind (all variants).
    """

    split: str
    prompt_style: str = "release"
    trajectories: int = 0
    variants: int = 1
    steps: int = 0
    failed_steps: int = 0
    sft: int = 0
    dpo: dict[str, int] = field(default_factory=lambda: {kind: 0 for kind in DPO_KINDS})

    @property
    def dpo_total(self) -> int:
        """All DPO rows."""
        return sum(self.dpo.values())

    def summary_lines(self) -> list[str]:
        """A short human-readable report, one fact per line."""
        kinds = ", ".join(f"{kind} {count}" for kind, count in self.dpo.items())
        return [f"split {self.split}: {self.trajectories} trajectories x {self.variants} text variant(s), "
                f"{self.steps} subtasks ({self.failed_steps} failed)",
                f"SFT samples: {self.sft}",
                f"DPO rows: {self.dpo_total} ({kinds})"]

    def to_json(self) -> dict[str, object]:
        """The counts as a JSON-ready dict (dpo_total included)."""
        return {**asdict(self), "dpo_total": self.dpo_total}


def build_datasets(config: BuildConfig) -> BuildCounts:
    """Read a split and write the SFT/DPO files described in the module docstring.

    Raises:
        TrajectoryError: a malformed info.txt, a missing image or a paraphrase file that does not fit the data.
        OSError: when the output cannot be written.
    """
    trajectories = [read_trajectory(path) for path in find_trajectories(config.data_dir, config.split)]
    if not config.designed_failures:
        trajectories = [trajectory.without_failures() for trajectory in trajectories]
    if config.split != "test":
        leaked = sorted({item.task_id for item in trajectories if is_test_task(item.task_id)})
        if leaked:
            raise TrajectoryError(f"{config.data_dir}/{config.split}: test task(s) {', '.join(leaked)} (or variants of "
                                  "them) must never reach training data; remove them from this split")
    rewrites = load_paraphrases(config.paraphrases, trajectories) if config.paraphrases is not None else {}
    counts = BuildCounts(split=config.split, prompt_style=config.prompt_style, trajectories=len(trajectories))
    counts.steps = sum(len(trajectory.steps) for trajectory in trajectories)
    counts.failed_steps = sum(not step.succeeded for trajectory in trajectories for step in trajectory.steps)
    counts.variants = 1 + (len(next(iter(rewrites.values()))) if rewrites else 0)

    samples: list[SftSample] = []
    rows: list[DpoRow] = []
    for trajectory in trajectories:
        if config.images:
            _check_images(trajectory)
        rewritten = [apply_rewrite(trajectory, rewrite) for rewrite in rewrites.get(trajectory.task_id, [])]
        variants = [trajectory, *rewritten]
        for number, variant in enumerate(variants):
            samples.extend(sft_samples(variant, number, config.prompt_style, config.answer_style))
            rows.extend(dpo_rows(variant, number, config.prompt_style))
    counts.sft = len(samples)
    for row in rows:
        counts.dpo[row.kind] += 1

    out_dir = Path(config.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_json(out_dir / f"sft_{config.split}.json",
                [_llava_entry(sample, out_dir, config.images) for sample in samples])
    _write_json(out_dir / f"dpo_{config.split}.json",
                [{"prompt": row.prompt, "chosen": row.chosen, "rejected": row.rejected} for row in rows])
    if config.hf_datasets:
        _save_hf_sft(samples, out_dir / "hf" / f"sft_{config.split}", config.images)
        _save_hf_dpo(rows, out_dir / "hf" / f"dpo_{config.split}")
    _write_json(out_dir / f"counts_{config.split}.json", counts.to_json())
    return counts


def _check_images(trajectory: Trajectory) -> None:
    for step in trajectory.steps:
        if not step.succeeded:
            continue
        for image in trajectory.images(step):
            if not image.is_file():
                raise TrajectoryError(f"{trajectory.source}: block {step.number} (line {step.line}): missing image "
                                      f"{image} (build with images off to make text-only data)")


def _llava_entry(sample: SftSample, out_dir: Path, images: bool) -> dict[str, object]:
    entry: dict[str, object] = {"id": sample.id}
    human = sample.human
    if images:
        entry["image"] = [Path(os.path.relpath(image, out_dir)).as_posix() for image in sample.images]
        human = IMAGE_TOKEN * len(sample.images) + "\n" + human
    entry["conversations"] = [{"from": "human", "value": human}, {"from": "gpt", "value": sample.answer}]
    return entry


def _write_json(path: Path, data: object) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _save_hf_sft(samples: list[SftSample], path: Path, images: bool) -> None:
    import datasets

    records: list[dict[str, object]] = []
    for sample in samples:
        record: dict[str, object] = {
            "id": sample.id, "task_id": sample.task_id, "variant": sample.variant, "step": sample.step,
            "messages": [{"role": "user", "content": sample.human}, {"role": "assistant", "content": sample.answer}],
        }
        if images:
            record["images"] = [str(image) for image in sample.images]
        records.append(record)
    dataset = datasets.Dataset.from_list(records)
    if images:
        dataset = dataset.cast_column("images", datasets.Sequence(datasets.Image()))
    dataset.save_to_disk(str(path))


def _save_hf_dpo(rows: list[DpoRow], path: Path) -> None:
    import datasets

    dataset = datasets.Dataset.from_list([
        {"id": row.id, "task_id": row.task_id, "kind": row.kind, "prompt": [{"role": "user", "content": row.prompt}],
         "chosen": [{"role": "assistant", "content": row.chosen}],
         "rejected": [{"role": "assistant", "content": row.rejected}]}
        for row in rows])
    dataset.save_to_disk(str(path))
