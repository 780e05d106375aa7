"""The model card (README.md) written next to every checkpoint `homiebot train` produces."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from emmoe_eval.conversation import SFT_REQUEST_LINE

_SETTING_ROWS: tuple[tuple[str, str], ...] = (
    ("lora_r", "LoRA rank"), ("lora_alpha", "LoRA alpha"), ("lora_dropout", "LoRA dropout"),
    ("learning_rate", "learning rate"), ("lr_scheduler", "schedule"), ("warmup_ratio", "warm-up ratio"),
    ("epochs", "epochs"), ("max_steps", "max steps (-1: epochs)"), ("batch_size", "global batch"),
    ("max_length", "max length (tokens)"), ("beta", "DPO beta"), ("weight_decay", "weight decay"),
    ("max_grad_norm", "max grad norm"), ("optim", "optimiser"), ("load_in_4bit", "4-bit base (QLoRA)"),
    ("seed", "seed"),
)


def write_model_card(path: Path, summary: dict[str, Any]) -> None:
    """Write the card for a run described by `summary` (the content of training_summary.json)."""
    Path(path).write_text(model_card(summary), encoding="utf-8")


def model_card(summary: dict[str, Any]) -> str:
    """The card's Markdown: what was trained on what, with which settings, how the loss went, how to load it."""
    settings = summary["settings"]
    stage = summary["stage"]
    is_vlm = summary["model_kind"] == "vlm"
    lines = [
        "---",
        "library_name: transformers",
        "tags: [homiebot, emmoe, embodied-planning, lora, " + ("sft" if stage == "sft" else "dpo") + "]",
        "---",
        f"# HomieBot planner, {stage.upper()} stage",
        "",
        f"LoRA {stage.upper()} of `{summary['base_model']}` ({'vision-language' if is_vlm else 'text-only'} model)"
        f" on EMMOE planner data built by `homiebot data build`, trained with `homiebot train {stage}`.",
        "",
        "## Data",
        "",
        f"- dataset: `{summary['data']}`",
        f"- rows used: {summary['rows']}",
    ]
    lines += _data_lines(summary)
    lines += [
        "",
        "## Settings",
        "",
        "| setting | value |",
        "|---|---|",
    ]
    lines += [f"| {label} | {settings[key]} |" for key, label in _SETTING_ROWS
              if stage == "dpo" or key != "beta"]
    lines += [
        f"| per-device batch x accumulation x processes | {summary['per_device_batch_size']} x "
        f"{summary['gradient_accumulation_steps']} x {summary['processes']} |",
        f"| device, precision | {summary['device']}, {summary['precision']} |",
        f"| gradient checkpointing | {summary['gradient_checkpointing']} |",
        f"| LoRA target modules (regex) | `{_table_cell(summary['lora_target_modules'])}` |",
        f"| system prompt | {_describe_system_prompt(settings['system_prompt'])} |",
        "",
        "## Training",
        "",
        f"- optimiser steps: {summary['steps']}, wall time: {summary['runtime_s']:.1f} s",
    ]
    losses = summary["losses"]
    if losses:
        lines.append(f"- training loss: {losses[0][1]:.4f} at step {losses[0][0]} -> {losses[-1][1]:.4f} at step "
                     f"{losses[-1][0]}")
    validation = summary.get("validation_losses") or []
    if validation:
        curve = ", ".join(f"{loss:.4f} (step {step})" for step, loss in validation)
        lines.append(f"- validation loss ({summary['data_counts'].get('validation_rows', '?')} held-out rows of "
                     f"tasks {', '.join(settings.get('validation_tasks') or ())}): {curve}")
    build = summary["data_counts"].get("build") or {}
    lines += (_planner_prompt_lines() if build.get("prompt_style") in ("planner", "planner_names")
              else _release_prompt_lines(is_vlm))
    lines += [
        "",
        "## Files and loading",
        "",
    ]
    if settings["save"] == "merged":
        lines += ["The root holds the merged model with its tokenizer/processor; `adapter/` holds the LoRA adapter.",
                  "", "```python",
                  "from transformers import AutoModelForCausalLM, AutoModelForImageTextToText",
                  f"model = {'AutoModelForImageTextToText' if is_vlm else 'AutoModelForCausalLM'}"
                  ".from_pretrained(\"<this folder>\")", "```"]
    else:
        lines += ["The root holds the LoRA adapter and the tokenizer/processor; transformers loads it with peft",
                  f"installed, reading the base model from `{summary['base_model']}`.", "", "```python",
                  "from peft import AutoPeftModelForCausalLM",
                  "model = AutoPeftModelForCausalLM.from_pretrained(\"<this folder>\")", "```"]
    lines += ["", "The planner's `hf` backend takes this folder as its model path.", ""]
    return "\n".join(lines)


def _planner_prompt_lines() -> list[str]:
    return [
        "",
        "## Prompt format",
        "",
        "User turn: the run-time planner's own message (`homiebot data build --prompt-style planner`), with the text",
        "observation first:",
        "",
        "```",
        "Visible objects:",
        "front: <names visible to the front, small objects with where they rest (apple (on sofa)), or None>",
        "left: ...", "back: ...", "right: ...",
        "Task: <task>",
        "Inventory: <held objects or None>",
        "Historical Execution: (1) Go to, fridge(success) (2) Open, fridge(fail) ",
        "Feedback: <last feedback or None>",
        "Now based on the instruction above, please output Analysis, Subtask and Model in the mentioned format.",
        "```",
        "",
        "Answer: `Analysis: ...` / `Subtask: [...]` / `Model: ...`. `planner_prompt.json` records the system turn used",
        "in training; the planner's hf, smollm2 and homiebot backends read it and prompt the model the same way.",
    ]


def _release_prompt_lines(is_vlm: bool) -> list[str]:
    lines = [
        "",
        "## Prompt format",
        "",
        "User turn (the SFT human turn of EMMOE.md section 6):",
        "",
        "```",
        "Task: <task>",
        "Inventory: <held objects or None>",
        "Historical Execution:(1)[Go to, fridge] (NoMaD) (success)",
        "(2)[Open, fridge] (octo) (fail)",
        "",
        "Feedback: <last feedback or None>",
        SFT_REQUEST_LINE,
        "```",
        "",
        "(`Historical Execution: None` on the first step.) Answer: `Analysis: ...` / `Subtask: [...]` / `Model: ...`.",
        "To match training, run the planner with the `sft` request variant and without the in-context example. The",
        "history lines above are the SFT data's format; the release's live loop writes `(n) Go to, fridge(success) `",
        "instead (the released checkpoint was run with that mismatch too).",
    ]
    if not is_vlm:
        lines.append("This text-only model saw no observations in training (the data has no visible-object names).")
    return lines


def _table_cell(text: str) -> str:
    return text.replace("|", "\\|")  # a bare | would end the Markdown table cell


def _describe_system_prompt(prompt: str | None) -> str:
    return "none" if not prompt else f"{len(prompt)} characters (the text is in training_summary.json)"


def _data_lines(summary: dict[str, Any]) -> list[str]:
    counts = summary["data_counts"]
    lines = []
    build = counts.get("build")
    if build:
        dpo = ", ".join(f"{kind} {count}" for kind, count in build["dpo"].items())
        lines += [f"- built from split `{build['split']}`: {build['trajectories']} trajectories x {build['variants']} "
                  f"text variant(s), {build['steps']} subtasks ({build['failed_steps']} failed)",
                  f"- SFT samples in the build: {build['sft']}; DPO rows: {build['dpo_total']} ({dpo})"]
    if "kinds" in counts:
        used = ", ".join(f"{kind} {count}" for kind, count in counts["kinds"].items())
        lines.append(f"- DPO rows used by kind: {used}")
    if "images" in counts:
        images = "four observations per sample (front, left, back, right)" if counts["images"] else "none (text only)"
        lines.append(f"- images: {images}")
    return lines
