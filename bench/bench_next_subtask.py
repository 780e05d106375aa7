"""Next-subtask accuracy of a trained planner on built SFT rows: does it choose the expert's next subtask?

For each row the model gets the row's conversation up to the last user turn (exactly what it was trained on, without
a system prompt unless the checkpoint's planner_prompt.json says otherwise) and generates greedily (no constrained
decoding); the answer's subtask is compared with the expert's (answers with or without the Analysis line). Rows of the validation tasks (held out from training)
and, for comparison, the same number of training rows are scored. A run-time planner step additionally has
constrained decoding, so these figures are a lower bound of its step choices on the same states.

    python bench/bench_next_subtask.py --adapter models/homiebot-135m --data /path/to/built/hf/sft_train \
        --validation-tasks 7,34,63 [--rows 80] [--base ~/.cache/homiebot/smollm2]

Prints the figures and writes bench/results/next_subtask.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from emmoe_eval.dataset import base_task_id

from homiebot_planner.backends.constrained import with_analysis_line
from homiebot_planner.backends.hf import HFConfig, load_local_model, trained_prompt
from homiebot_planner.parsing import ParsedOutput, parse_output

RESULTS = Path(__file__).resolve().parent / "results" / "next_subtask.json"


def _load(base: Path, adapter: Path) -> tuple[Any, Any]:
    """Base plus the adapter's whole stack (e.g. a DPO stage over its SFT stage), merged as the planner loads it."""
    loaded = load_local_model(HFConfig(model_path=str(adapter), base_model_path=str(base), dtype="float32"))
    return loaded.tokenizer, loaded.model


def _system_prompt(adapter: Path) -> str | None:
    record = trained_prompt(adapter)
    return record["system_prompt"] if record else None


def parse_answer(text: str) -> ParsedOutput | None:
    """A full answer, or a decision-style one (Subtask and Model lines only)."""
    return parse_output(with_analysis_line(text))


def score_rows(rows: list[dict[str, Any]], tokenizer: Any, model: Any, system: str | None) -> dict[str, Any]:
    """Greedy answers for the rows; the share whose subtask (and whose action) equals the expert's."""
    import torch

    exact = action = parsed = 0
    started = time.perf_counter()
    for row in rows:
        turns = [{"role": turn["role"], "content": turn["content"]} for turn in row["messages"]]
        prompt = ([{"role": "system", "content": system}] if system else []) + turns[:-1]
        ids = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, return_tensors="pt",
                                            return_dict=True)["input_ids"]
        with torch.no_grad():
            output = model.generate(ids, max_new_tokens=64, do_sample=False, pad_token_id=tokenizer.eos_token_id)
        answer = parse_answer(tokenizer.decode(output[0, ids.shape[1]:], skip_special_tokens=True))
        expected = parse_answer(turns[-1]["content"])
        if answer is None or expected is None:
            continue
        parsed += 1
        exact += answer.subtask_text == expected.subtask_text
        action += answer.subtask.action == expected.subtask.action
    count = len(rows)
    return {"rows": count, "parsed": parsed, "subtask_accuracy": round(exact / count, 4),
            "action_accuracy": round(action / count, 4), "seconds_per_row": round((time.perf_counter() - started)
                                                                                  / max(1, count), 2)}


def main(argv: list[str] | None = None) -> int:
    """Score validation rows and as many training rows; print and save the figures."""
    import datasets

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adapter", type=Path, required=True, help="a trained adapter folder")
    parser.add_argument("--data", type=Path, required=True, help="a built SFT dataset folder (hf/sft_train)")
    parser.add_argument("--validation-tasks", required=True, help="held-out task ids, e.g. 7,34,63")
    parser.add_argument("--rows", type=int, default=80, help="at most this many rows per group")
    parser.add_argument("--base", type=Path, default=Path.home() / ".cache" / "homiebot" / "smollm2")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    held_out = {item.strip() for item in args.validation_tasks.split(",") if item.strip()}
    rows = list(datasets.load_from_disk(str(args.data)))
    validation = [row for row in rows if base_task_id(str(row["task_id"])) in held_out]
    training = [row for row in rows if base_task_id(str(row["task_id"])) not in held_out]
    generator = random.Random(args.seed)
    validation = generator.sample(validation, min(args.rows, len(validation)))
    training = generator.sample(training, min(args.rows, len(validation)))
    tokenizer, model = _load(args.base, args.adapter)
    system = _system_prompt(args.adapter)
    figures = {"adapter": str(args.adapter), "validation_tasks": sorted(held_out),
               "validation": score_rows(validation, tokenizer, model, system),
               "training": score_rows(training, tokenizer, model, system)}
    print(json.dumps(figures, indent=1))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
