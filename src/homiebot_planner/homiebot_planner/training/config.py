"""TrainConfig: one typed configuration for `homiebot train sft|dpo`, with the paper's presets.

Presets (EMMOE.md section 6 and the released training scripts), both 1 epoch, global batch 16, cosine schedule
with 3 % warm-up, max length 2048, LoRA dropout 0.05 on every linear layer of the language model (not the vision
tower or projector):

| stage | LoRA r | alpha | learning rate | beta | max grad norm |
|-------|--------|-------|---------------|------|---------------|
| sft   | 128    | 256   | 5e-4          | -    | 1.0           |
| dpo   | 8      | 8     | 5e-6          | 0.1  | 0.3           |

The paper also quantised the base to 4 bit (QLoRA) for both stages; here that is the `load_in_4bit` switch, off by
default because it is a hardware choice (bitsandbytes; on CPU it runs, slowly).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from emmoe_core.validation import require_positive

STAGES: tuple[str, ...] = ("sft", "dpo")
SAVE_MODES: tuple[str, ...] = ("merged", "adapter")
DEVICES: tuple[str, ...] = ("auto", "cpu", "cuda")
ADAPTER_DTYPES: tuple[str, ...] = ("float32", "float16")



class TrainingSetupError(ValueError):
    """A setting that does not fit the model, the data or the machine; the message says which and how to fix it."""


PRESETS: dict[str, dict[str, Any]] = {
    "sft": {"lora_r": 128, "lora_alpha": 256, "learning_rate": 5e-4, "max_grad_norm": 1.0},
    "dpo": {"lora_r": 8, "lora_alpha": 8, "learning_rate": 5e-6, "max_grad_norm": 0.3},
}


@dataclass(frozen=True)
class TrainConfig:
    """Everything one training stage needs.

    Attributes:
        stage: `sft` or `dpo`.
        model: local folder of the model to tune (a base model for SFT, usually the SFT checkpoint for DPO).
        data: the folder written by `homiebot data build` (its `hf/<stage>_<split>` dataset is used), or a
            dataset folder saved by it directly.
        output_dir: where the checkpoint, the adapter and the model card go.
        split: which built split to train on.
        lora_r: LoRA rank.
        lora_alpha: LoRA scaling numerator.
        lora_dropout: dropout on the LoRA path.
        learning_rate: peak learning rate.
        epochs: passes over the data.
        batch_size: global batch size (per-device batch x gradient accumulation x processes).
        per_device_batch_size: samples per forward pass on each device; by default the global batch divided by the
            number of processes (no accumulation).
        max_length: maximum tokens of a sample (image tokens included).
        beta: DPO's KL weight (DPO only).
        lr_scheduler: the transformers scheduler name.
        warmup_ratio: fraction of steps spent warming up.
        weight_decay: AdamW weight decay.
        max_grad_norm: gradient clipping.
        max_steps: stop after this many optimiser steps (-1: run the epochs).
        load_in_4bit: quantise the frozen base to 4 bit NF4 (QLoRA) with bitsandbytes.
        save: `merged` writes the full merged model at the checkpoint root (and the adapter in `adapter/`);
            `adapter` writes only the LoRA adapter at the root (loadable by transformers + peft, which find the base
            model through the adapter's `base_model_name_or_path`).
        system_prompt: system message prepended to every sample (None: no system turn); give the planner's own
            prompt so that training and inference see the same text.
        images: feed the four observations to vision-language models in SFT (DPO rows are text only, as released).
        device: `auto` (GPU when available), `cpu` or `cuda`.
        cpu_bf16: on the CPU, run forward and backward under bfloat16 autocast (LoRA weights and optimiser state
            stay float32); measured 1.5x faster on this project's AMX CPU.
        gradient_checkpointing: None picks it per device (on for GPU, off for CPU).
        optim: the transformers optimiser name.
        seed: random seed.
        logging_steps: log the loss every this many steps.
        validation_tasks: task ids held out of training (their scene variants `<id>_v<n>` with them); the loss on
            their samples is measured every `eval_steps` steps and at the end (hyper-parameters are chosen on it,
            never on test tasks).
        eval_steps: how often the validation loss is measured (0: only at the end).
        save_steps: write a resumable checkpoint every this many steps (0: none); a rerun with the same output
            folder continues from the last one.
        adapter_dtype: precision the LoRA weights are saved in: `float32`, or `float16` (half the file size; the
            shipped adapter uses it to stay under 5 MB).
        subtask_weight: SFT of text LMs: how many times the tokens of the answer's `[action, object]` count in the
            loss (1: plain answer loss).
    """

    stage: str
    model: Path
    data: Path
    output_dir: Path
    split: str = "train"
    lora_r: int = 128
    lora_alpha: int = 256
    lora_dropout: float = 0.05
    learning_rate: float = 5e-4
    epochs: float = 1.0
    batch_size: int = 16
    per_device_batch_size: int | None = None
    max_length: int = 2048
    beta: float = 0.1
    lr_scheduler: str = "cosine"
    warmup_ratio: float = 0.03
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    max_steps: int = -1
    load_in_4bit: bool = False
    save: str = "merged"
    system_prompt: str | None = None
    images: bool = True
    device: str = "auto"
    cpu_bf16: bool = False
    gradient_checkpointing: bool | None = None
    optim: str = "adamw_torch"
    seed: int = 42
    logging_steps: int = 10
    validation_tasks: tuple[str, ...] = ()
    eval_steps: int = 0
    save_steps: int = 0
    adapter_dtype: str = "float32"
    subtask_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.adapter_dtype not in ADAPTER_DTYPES:
            raise ValueError(f"adapter_dtype must be one of {', '.join(ADAPTER_DTYPES)}, not {self.adapter_dtype!r}")
        require_positive("subtask_weight", self.subtask_weight)
        if self.subtask_weight != 1.0 and self.stage != "sft":
            raise ValueError("subtask_weight applies to the sft stage only")
        if self.eval_steps < 0 or self.save_steps < 0:
            raise ValueError("eval_steps and save_steps must be >= 0")
        if self.stage not in STAGES:
            raise ValueError(f"stage must be one of {', '.join(STAGES)}, not {self.stage!r}")
        if not Path(self.model).is_dir():
            raise ValueError(f"--model {self.model}: no such folder (give a local model directory; nothing is "
                             "downloaded)")
        if not Path(self.data).is_dir():
            raise ValueError(f"--data {self.data}: no such folder (run `homiebot data build` first)")
        positive = ("lora_r", "lora_alpha", "learning_rate", "epochs", "batch_size", "max_length", "logging_steps")
        for name in positive:
            require_positive(name, getattr(self, name))
        if self.per_device_batch_size is not None:
            require_positive("per_device_batch_size", self.per_device_batch_size)
        if not 0.0 <= self.lora_dropout < 1.0:
            raise ValueError(f"lora_dropout must be in [0, 1), not {self.lora_dropout}")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ValueError(f"warmup_ratio must be in [0, 1), not {self.warmup_ratio}")
        require_positive("beta", self.beta)
        if self.max_steps == 0 or self.max_steps < -1:
            raise ValueError(f"max_steps must be -1 (run the epochs) or positive, not {self.max_steps}")
        if self.save not in SAVE_MODES:
            raise ValueError(f"save must be one of {', '.join(SAVE_MODES)}, not {self.save!r}")
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {self.device!r}")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay must be >= 0, not {self.weight_decay}")
        require_positive("max_grad_norm", self.max_grad_norm)

    @classmethod
    def from_preset(cls, stage: str, **settings: Any) -> TrainConfig:
        """The stage's paper preset, with `settings` (None values ignored) overriding it.

        Raises:
            ValueError: for an unknown stage or setting, or an invalid value.
        """
        if stage not in PRESETS:
            raise ValueError(f"stage must be one of {', '.join(STAGES)}, not {stage!r}")
        known = {item.name for item in fields(cls)}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ValueError(f"unknown training setting(s): {', '.join(unknown)}")
        chosen = {**PRESETS[stage], **{name: value for name, value in settings.items() if value is not None}}
        return cls(stage=stage, **chosen)

    def batch_layout(self, processes: int) -> tuple[int, int]:
        """(per-device batch, gradient accumulation steps) giving the global batch on `processes` devices.

        Raises:
            TrainingSetupError: when the global batch cannot be split evenly.
        """
        per_device = self.per_device_batch_size or max(1, self.batch_size // processes)
        if self.batch_size % (per_device * processes):
            raise TrainingSetupError(f"batch_size {self.batch_size} is not a multiple of per-device batch "
                                     f"{per_device} x {processes} process(es); change --batch-size or "
                                     "--per-device-batch-size")
        return per_device, self.batch_size // (per_device * processes)
