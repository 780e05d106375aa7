"""`homiebot train sft|dpo`: LoRA training of a planner with trl, from the datasets `homiebot data build` writes.

Models: any local causal LM (AutoModelForCausalLM + its tokenizer) or vision-language model whose config has a
`vision_config` (AutoModelForImageTextToText + its processor: LLaVA family, Qwen2-VL, ...). Every sample is the
planner's chat: an optional system turn (`TrainConfig.system_prompt`), the user turn (the SFT human turn), the
assistant answer. SFT trains on the answer tokens only (trl's prompt-completion form); VLMs get the four
observations before the user text. DPO rows are text only, as released, and the reference model is the tuned
model with its adapter switched off (trl's `ref_model=None` with a peft config).

Device handling: without a GPU (or with `device="cpu"`) training runs on the CPU in float32 without gradient
checkpointing; with one it uses bfloat16 when supported (float16 otherwise) and gradient checkpointing. Launch
under `accelerate launch --num_processes N -m homiebot.cli train ...` (or torchrun) for several GPUs: the global
batch is split over the processes and only the first one writes the checkpoint.

Checkpoint layout (`output_dir`):
* `save="merged"` (default): the merged model and its tokenizer/processor at the root (loads with
  `from_pretrained(output_dir)`, no peft needed), the LoRA adapter in `adapter/`;
* `save="adapter"`: the adapter and tokenizer/processor at the root (transformers + peft load it, finding the base
  model through `base_model_name_or_path`, which is the absolute path of `TrainConfig.model`);
* both: `README.md` (model card: data counts, settings, losses) and `training_summary.json`.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emmoe_eval.dataset import base_task_id

from homiebot_planner.backends.base import BackendError
from homiebot_planner.backends.hf import ADAPTER_FILE, PROMPT_FILE, adapter_stack, trained_prompt
from homiebot_planner.training.answer_loss import sft_trainer_class
from homiebot_planner.training.card import write_model_card
from homiebot_planner.training.config import TrainConfig, TrainingSetupError
from homiebot_planner.training.processors import load_processor

if TYPE_CHECKING:
    import datasets
    import torch

# SFT batches are padded to a multiple of this: few distinct shapes, so the CPU kernels are set up once per shape.
PAD_TO_MULTIPLE_OF = 16
# Module-path components of the vision side (LLaVA, Video-LLaVA, Qwen2-VL, Idefics, MiniCPM-V) and the output head:
# LoRA leaves them alone, and 4-bit loading keeps them unquantised.
NON_LANGUAGE_COMPONENTS: tuple[str, ...] = ("vision_tower", "image_tower", "video_tower", "vision_model", "visual",
                                            "vpm", "resampler", "connector", "multi_modal_projector", "mm_projector",
                                            "lm_head")


@dataclass
class TrainResult:
    """What a training run produced.

    Attributes:
        output_dir: the checkpoint folder.
        model_kind: `text` or `vlm`.
        rows: training samples (SFT) or preference rows (DPO).
        steps: optimiser steps taken.
        losses: (step, training loss) as logged.
        runtime_s: wall time of the training loop.
        main_process: whether this process wrote the checkpoint (always true outside distributed runs).
        summary: everything written to training_summary.json.
    """

    output_dir: Path
    model_kind: str
    rows: int
    steps: int
    losses: list[tuple[int, float]]
    runtime_s: float
    main_process: bool = True
    summary: dict[str, Any] = field(default_factory=dict)


def dataset_path(config: TrainConfig) -> Path:
    """The saved dataset a run reads: `data/hf/<stage>_<split>`, or `data` itself when it is a saved dataset.

    Raises:
        TrainingSetupError: when neither exists.
    """
    built = Path(config.data) / "hf" / f"{config.stage}_{config.split}"
    for candidate in (built, Path(config.data)):
        if (candidate / "dataset_info.json").is_file() or (candidate / "state.json").is_file():
            return candidate
    raise TrainingSetupError(f"--data {config.data}: no {built.relative_to(config.data)} dataset inside (run "
                             f"`homiebot data build --split {config.split}` into that folder, or pass a saved "
                             "dataset folder)")


def model_kind(model_dir: Path) -> str:
    """`vlm` when the model's config (for an adapter, its base model's) has a vision part, else `text`.

    Raises:
        TrainingSetupError: when the folder holds no loadable config.
    """
    model_dir = stacked_base(Path(model_dir))[0]
    if not (model_dir / "config.json").is_file():
        raise TrainingSetupError(f"--model {model_dir}: no config.json (give a local transformers model folder)")
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_dir)
    return "vlm" if getattr(config, "vision_config", None) is not None else "text"


def stacked_base(model_dir: Path) -> tuple[Path, list[Path]]:
    """The base model and the adapters (bottom first) of `--model`: a whole model, or a trained adapter (an SFT
    stage saved with --save adapter), whose stack is merged into its base before the next stage trains on it.

    Raises:
        TrainingSetupError: when an adapter's base model is missing.
    """
    try:
        return adapter_stack(model_dir)
    except BackendError as error:
        raise TrainingSetupError(f"--model {model_dir}: {str(error).removeprefix('hf: ')}") from None


def planner_system_prompt(model_dir: Path, images: bool = True) -> str:
    """The system prompt the planner sends to this model: the four-image variant for a VLM trained on images,
    the visible-object-names variant otherwise (the training data itself carries no object names)."""
    from homiebot_planner.prompts import system_prompt

    return system_prompt("images" if images and model_kind(model_dir) == "vlm" else "text")


def lora_target_pattern(model: torch.nn.Module) -> str:
    """A peft `target_modules` regex matching every linear layer of the language model (none of the vision side).

    Raises:
        TrainingSetupError: when the model has no such layer.
    """
    import torch

    suffixes = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                       if isinstance(module, torch.nn.Linear)
                       and not set(name.split(".")) & set(NON_LANGUAGE_COMPONENTS)})
    if not suffixes:
        raise TrainingSetupError("the model has no linear layers outside its vision part: nothing for LoRA to adapt")
    excluded = "|".join(NON_LANGUAGE_COMPONENTS)
    return rf"^(?!.*\b(?:{excluded})\b).*\.(?:{'|'.join(map(re.escape, suffixes))})$"


def run_training(config: TrainConfig) -> TrainResult:
    """Train one stage and write the checkpoint described in the module docstring.

    Raises:
        TrainingSetupError: a setting that does not fit the model, the data or the machine (the message says which).
    """
    import torch
    from accelerate import PartialState

    on_gpu = config.device != "cpu" and torch.cuda.is_available()
    if config.device == "cuda" and not on_gpu:
        raise TrainingSetupError("--device cuda: no CUDA device is visible on this machine")
    state = PartialState(cpu=not on_gpu)
    per_device, accumulation = config.batch_layout(state.num_processes)
    kind = model_kind(config.model)
    data_dir = dataset_path(config)
    model, processing_class, precision = _load_model(config, kind, on_gpu, state.local_process_index)
    dataset, data_counts = _prepare_dataset(config, data_dir, kind)
    dataset, validation = _hold_out(config, dataset)
    _check_length(config, dataset, processing_class, kind)

    settings = _trainer_settings(config, on_gpu, per_device, accumulation, precision, validation is not None, kind)
    peft_config = _lora_config(config, model)
    trainer = _make_trainer(config, model, processing_class, dataset, settings, peft_config, validation)
    started = time.perf_counter()
    trainer.train(resume_from_checkpoint=_last_checkpoint(config))
    validation_losses = [(int(entry["step"]), float(entry["eval_loss"])) for entry in trainer.state.log_history
                         if "eval_loss" in entry]
    if validation is not None and (not validation_losses or validation_losses[-1][0] != trainer.state.global_step):
        validation_losses.append((trainer.state.global_step, float(trainer.evaluate()["eval_loss"])))
    runtime = time.perf_counter() - started
    losses = [(int(entry["step"]), float(entry["loss"])) for entry in trainer.state.log_history if "loss" in entry]
    data_counts["validation_rows"] = len(validation) if validation is not None else 0

    summary = {
        "stage": config.stage, "base_model": str(Path(config.model).resolve()), "model_kind": kind,
        "data": str(data_dir.resolve()), "data_counts": data_counts, "rows": len(dataset),
        "steps": trainer.state.global_step, "runtime_s": round(runtime, 3), "losses": losses,
        "validation_losses": validation_losses,
        "device": "cuda" if on_gpu else "cpu", "processes": state.num_processes,
        "precision": f"{precision} weights, bfloat16 autocast" if config.cpu_bf16 and not on_gpu else precision,
        "per_device_batch_size": per_device, "gradient_accumulation_steps": accumulation,
        "gradient_checkpointing": settings["gradient_checkpointing"],
        "lora_target_modules": peft_config.target_modules,
        "settings": {key: (str(value) if isinstance(value, Path) else value) for key, value in asdict(config).items()},
    }
    main_process = trainer.is_world_process_zero()
    trainer.accelerator.wait_for_everyone()
    if main_process:
        _save_checkpoint(config, trainer, processing_class, kind, on_gpu,
                         {key: data_counts[key] for key in ("answer_style", "object_locations")})
        output_dir = Path(config.output_dir)
        (output_dir / "training_summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        write_model_card(output_dir / "README.md", summary)
    trainer.accelerator.wait_for_everyone()
    return TrainResult(output_dir=Path(config.output_dir), model_kind=kind, rows=len(dataset),
                       steps=trainer.state.global_step, losses=losses, runtime_s=runtime, main_process=main_process,
                       summary=summary)


def _load_model(config: TrainConfig, kind: str, on_gpu: bool, device_index: int) -> tuple[Any, Any, str]:
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer, BitsAndBytesConfig

    model_dir, adapters = stacked_base(Path(config.model).resolve())
    if on_gpu:
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    else:
        dtype = torch.float32
    precision = str(dtype).removeprefix("torch.")
    load: dict[str, Any] = {"dtype": dtype}
    if config.load_in_4bit:
        load["quantization_config"] = BitsAndBytesConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
            bnb_4bit_compute_dtype=dtype, llm_int8_skip_modules=list(NON_LANGUAGE_COMPONENTS))
        load["device_map"] = {"": device_index if on_gpu else "cpu"}
        precision = f"4-bit NF4 base, {precision} compute"
    model_class = AutoModelForImageTextToText if kind == "vlm" else AutoModelForCausalLM
    model = model_class.from_pretrained(model_dir, **load)
    for stage in adapters:  # an adapter given as --model: merge it (and the stages under it) into the base
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, stage).merge_and_unload()
    if kind == "vlm":
        processing_class = load_processor(model_dir)
        tokenizer = processing_class.tokenizer
    else:
        processing_class = tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if not getattr(processing_class, "chat_template", None):
        raise TrainingSetupError(f"--model {config.model}: its tokenizer/processor has no chat template; add one "
                                 "(chat_template.jinja) so training and the planner render turns the same way")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    if config.load_in_4bit:
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=_checkpointing(config, on_gpu))
    return model, processing_class, precision


def _prepare_dataset(config: TrainConfig, data_dir: Path, kind: str) -> tuple[datasets.Dataset, dict[str, Any]]:
    import datasets

    dataset = datasets.load_from_disk(str(data_dir))
    system = [{"role": "system", "content": config.system_prompt}] if config.system_prompt else []
    counts: dict[str, Any] = {"rows": len(dataset)}
    held_column = ["task_id"] if config.validation_tasks and "task_id" in dataset.column_names else []
    built_counts = Path(config.data) / f"counts_{config.split}.json"
    if built_counts.is_file():
        counts["build"] = json.loads(built_counts.read_text(encoding="utf-8"))
    if config.stage == "sft":
        if "messages" not in dataset.column_names:
            raise TrainingSetupError(f"{data_dir}: not an SFT dataset (no 'messages' column)")
        with_images = kind == "vlm" and config.images and "images" in dataset.column_names
        counts["images"] = with_images

        def to_prompt_completion(row: dict[str, Any]) -> dict[str, Any]:
            user, answer = row["messages"][0], row["messages"][-1]
            return {"prompt": system + [user], "completion": [answer]}

        keep = (["images"] if with_images else []) + held_column
        dataset = dataset.map(to_prompt_completion,
                              remove_columns=[name for name in dataset.column_names if name not in keep])
        analysed = any(row["completion"][0]["content"].startswith("Analysis:") for row in dataset)
        counts["answer_style"] = "analysis" if analysed else "decision"
        counts["object_locations"] = counts.get("build", {}).get("prompt_style") == "planner"
    else:
        if not {"prompt", "chosen", "rejected"} <= set(dataset.column_names):
            raise TrainingSetupError(f"{data_dir}: not a DPO dataset (needs prompt, chosen and rejected columns)")
        record = trained_prompt(Path(config.model))  # DPO keeps the prompt record of the model it starts from
        counts["answer_style"] = record["answer_style"] if record else "analysis"
        counts["object_locations"] = bool(record and record["object_locations"])
        if "kind" in dataset.column_names:
            kinds = dataset["kind"]
            counts["kinds"] = {name: kinds.count(name) for name in sorted(set(kinds))}
        dataset = dataset.map(lambda row: {"prompt": system + row["prompt"]},
                              remove_columns=[name for name in dataset.column_names
                                              if name not in ("prompt", "chosen", "rejected", *held_column)])
    if len(dataset) == 0:
        raise TrainingSetupError(f"{data_dir}: the dataset is empty")
    return dataset, counts


def _check_length(config: TrainConfig, dataset: datasets.Dataset, processing_class: Any, kind: str) -> None:
    """Fail early, with the numbers, when the longest sample exceeds max_length (images would be cut mid-way)."""
    def text_size(row: dict[str, Any]) -> int:
        return sum(len(message["content"]) for column in ("prompt", "completion", "chosen", "rejected")
                   for message in row.get(column) or [])

    longest = max(range(len(dataset)), key=lambda index: text_size(dataset[index]))
    row = dataset[longest]
    answer = row.get("completion") or row.get("chosen")
    messages = row["prompt"] + answer
    images = row.get("images") or []
    if images:
        placeholders = [{"type": "image"}] * len(images)
        messages = [{**message, "content": [*placeholders, {"type": "text", "text": message["content"]}]}
                    if message["role"] == "user" else message for message in messages]
    text = processing_class.apply_chat_template(messages, tokenize=False)
    if kind == "vlm" and images:
        tokens = processing_class(images=images, text=[text], return_tensors="pt")["input_ids"].shape[-1]
    else:
        tokenizer = getattr(processing_class, "tokenizer", processing_class)
        tokens = len(tokenizer(text, add_special_tokens=False)["input_ids"])
    if tokens > config.max_length:
        counted = " (images included)" if images else ""
        raise TrainingSetupError(f"the longest sample is {tokens} tokens{counted}, more than --max-length "
                                 f"{config.max_length}; raise --max-length")


def _hold_out(config: TrainConfig, dataset: datasets.Dataset) -> tuple[datasets.Dataset, datasets.Dataset | None]:
    """(training rows, validation rows or None): rows of the validation tasks and their variants are held out."""
    if not config.validation_tasks:
        return dataset, None
    if "task_id" not in dataset.column_names:
        raise TrainingSetupError("--validation-tasks needs a dataset with a task_id column (rebuild it with "
                                 "`homiebot data build`)")
    held = set(config.validation_tasks)
    flags = [base_task_id(task_id) in held for task_id in dataset["task_id"]]
    validation = dataset.select([index for index, flag in enumerate(flags) if flag])
    training = dataset.select([index for index, flag in enumerate(flags) if not flag])
    if len(validation) == 0 or len(training) == 0:
        raise TrainingSetupError(f"--validation-tasks {','.join(config.validation_tasks)} leaves "
                                 f"{len(training)} training and {len(validation)} validation rows")
    keep = [name for name in training.column_names if name != "task_id"]
    return training.select_columns(keep), validation.select_columns(keep)


def _last_checkpoint(config: TrainConfig) -> str | None:
    """The newest resumable checkpoint in the output folder (when checkpoints are on), or None."""
    if not config.save_steps or not Path(config.output_dir).is_dir():
        return None
    from transformers.trainer_utils import get_last_checkpoint

    return get_last_checkpoint(str(config.output_dir))


def _checkpointing(config: TrainConfig, on_gpu: bool) -> bool:
    return on_gpu if config.gradient_checkpointing is None else config.gradient_checkpointing


def _trainer_settings(config: TrainConfig, on_gpu: bool, per_device: int, accumulation: int,
                      precision: str, validating: bool = False, kind: str = "text") -> dict[str, Any]:
    checkpointing = _checkpointing(config, on_gpu)
    settings: dict[str, Any] = {
        "output_dir": str(config.output_dir), "num_train_epochs": config.epochs, "max_steps": config.max_steps,
        "per_device_train_batch_size": per_device, "gradient_accumulation_steps": accumulation,
        "learning_rate": config.learning_rate, "lr_scheduler_type": config.lr_scheduler,
        "warmup_steps": config.warmup_ratio, "weight_decay": config.weight_decay,
        "max_grad_norm": config.max_grad_norm, "optim": config.optim, "seed": config.seed,
        "logging_steps": config.logging_steps, "logging_first_step": True, "report_to": [],
        "save_strategy": "steps" if config.save_steps else "no", "save_steps": config.save_steps or 500,
        "save_total_limit": 1,
        "eval_strategy": "steps" if validating and config.eval_steps else "no",
        "eval_steps": config.eval_steps or None, "per_device_eval_batch_size": per_device,
        "prediction_loss_only": True,
        "max_length": config.max_length, "use_cpu": not on_gpu,
        "bf16": (on_gpu and "bfloat16" in precision) or (not on_gpu and config.cpu_bf16),
        "fp16": on_gpu and "float16" in precision and "bfloat16" not in precision,
        "gradient_checkpointing": checkpointing, "dataloader_num_workers": 0,
    }
    if checkpointing:
        settings["gradient_checkpointing_kwargs"] = {"use_reentrant": False}
    if config.stage == "dpo":
        settings["beta"] = config.beta
    elif kind == "text":  # trl pads vision-language batches its own way
        settings["pad_to_multiple_of"] = PAD_TO_MULTIPLE_OF
    return settings


def _lora_config(config: TrainConfig, model: Any) -> Any:
    from peft import LoraConfig

    return LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                      target_modules=lora_target_pattern(model), bias="none", task_type="CAUSAL_LM")


def _make_trainer(config: TrainConfig, model: Any, processing_class: Any, dataset: datasets.Dataset,
                  settings: dict[str, Any], peft_config: Any, validation: datasets.Dataset | None = None) -> Any:
    if config.stage == "sft":
        from trl import SFTConfig

        trainer_class = sft_trainer_class(model, config.subtask_weight)
        return trainer_class(model=model, args=SFTConfig(**settings), train_dataset=dataset, eval_dataset=validation,
                             processing_class=processing_class, peft_config=peft_config)
    from trl import DPOConfig, DPOTrainer

    return DPOTrainer(model=model, ref_model=None, args=DPOConfig(**settings), train_dataset=dataset,
                      eval_dataset=validation, processing_class=processing_class, peft_config=peft_config)


def _write_prompt_record(config: TrainConfig, directory: Path, prompt: Mapping[str, Any]) -> None:
    """planner_prompt.json: the system turn used in training, the answers' style and whether the text observations
    said where objects rest (`prompt`), so that the hf backend prompts and decodes the model the same way."""
    directory.mkdir(parents=True, exist_ok=True)
    record = {"system_prompt": config.system_prompt or None, **prompt}
    (directory / PROMPT_FILE).write_text(json.dumps(record) + "\n", encoding="utf-8")


def _save_adapter(config: TrainConfig, trainer: Any, directory: Path, prompt: Mapping[str, Any]) -> None:
    """The LoRA adapter (in `adapter_dtype`) and its prompt record."""
    trainer.model.save_pretrained(directory)
    if (Path(config.model) / ADAPTER_FILE).is_file():  # a stage over an adapter names that adapter as its base
        settings = json.loads((directory / ADAPTER_FILE).read_text(encoding="utf-8"))
        settings["base_model_name_or_path"] = str(Path(config.model).resolve())
        (directory / ADAPTER_FILE).write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    if config.adapter_dtype != "float32":
        import torch
        from safetensors.torch import load_file, save_file

        weights = directory / "adapter_model.safetensors"
        tensors = load_file(str(weights))
        save_file({name: tensor.to(getattr(torch, config.adapter_dtype)) for name, tensor in tensors.items()},
                  str(weights), metadata={"format": "pt"})
    _write_prompt_record(config, directory, prompt)


def _save_checkpoint(config: TrainConfig, trainer: Any, processing_class: Any, kind: str, on_gpu: bool,
                     prompt: Mapping[str, Any]) -> None:
    output_dir = Path(config.output_dir)
    if config.save == "adapter":
        _save_adapter(config, trainer, output_dir, prompt)
        processing_class.save_pretrained(output_dir)
        return
    adapter_dir = output_dir / "adapter"
    _save_adapter(config, trainer, adapter_dir, prompt)
    _write_prompt_record(config, output_dir, prompt)
    if config.load_in_4bit:
        # Merging into 4-bit weights loses precision: reload the base unquantised and merge the saved adapter.
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

        model_class = AutoModelForImageTextToText if kind == "vlm" else AutoModelForCausalLM
        dtype = (torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16) if on_gpu else torch.float32
        base = model_class.from_pretrained(Path(config.model).resolve(), dtype=dtype)
        merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    else:
        merged = trainer.model.merge_and_unload()
    merged.save_pretrained(output_dir)
    processing_class.save_pretrained(output_dir)
