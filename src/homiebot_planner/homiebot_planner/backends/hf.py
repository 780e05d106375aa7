"""The hf backend: local transformers models, loaded from a directory only (no hub downloads).

Supported: text-only causal LMs (they get visible-object names) and image-text-to-text VLMs in the LLaVA family
(LLaVA, LLaVA-NeXT, Video-LLaVA) or with a processor chat template (Qwen2-VL, ...), which get the four views.
A directory holding `adapter_config.json` is a PEFT adapter: its base model is loaded from the adapter's
`base_model_name_or_path` (or `base_model_path` when set) and the adapter merged on top; when that base is itself an
adapter folder, the stack (e.g. SFT then DPO) is merged stage by stage. Optional 4-bit loading uses
bitsandbytes. Constrained decoding (see `constrained.py`) is a setting.

Checkpoints in the original LLaVA / Video-LLaVA training format (the released HomieBot-7B: `LlavaLlamaForCausalLM`
of the release's `videollava` package, towers named by `mm_image_tower` / `mm_vision_tower` in config.json, LoRA
extras in `non_lora_trainables.bin`) are refused with what to convert them with (src/homiebot_planner/README.md):
transformers would read their `model_type: llava` as its own LLaVA with default sub-configs and load random weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from homiebot_planner.backends.base import BackendError, ChatMessage, GenerationRequest, PlannerBackend
from homiebot_planner.backends.constrained import (
    constrained_answer,
    make_cancel_criteria,
    sampling_arguments,
    with_analysis_line,
)
from homiebot_planner.backends.fast_decoding import FastDecoding, SamplingRule

_DTYPES = ("auto", "float32", "bfloat16", "float16")
_OBSERVATION_MODES = ("auto", "images", "text")
ADAPTER_FILE = "adapter_config.json"
MAX_STACKED_ADAPTERS = 8  # a guard against loops of base names; the shipped planner stacks 4 stages
# Written by `homiebot train` beside a checkpoint: how the model was prompted in training ({"system_prompt": text or
# null}), so that it is prompted the same way at run time.
PROMPT_FILE = "planner_prompt.json"
# What a trained model answers: "analysis" (Analysis, Subtask and Model lines, the paper's) or "decision" (Subtask and
# Model only; the backend then decodes the decision right away and writes an empty Analysis line, keeping the
# three-line format every parser reads).
ANSWER_STYLES = ("analysis", "decision")
# Marks of the original LLaVA / Video-LLaVA format, which transformers cannot load (see the module docstring).
ORIGINAL_LLAVA_KEYS = ("mm_image_tower", "mm_video_tower", "mm_vision_tower")
ORIGINAL_LLAVA_ARCHITECTURES = ("LlavaLlamaForCausalLM", "LlavaMPTForCausalLM")
ORIGINAL_LLAVA_EXTRAS = "non_lora_trainables.bin"
CONVERSION_HINT = ("convert it to the transformers Video-LLaVA format (VideoLlavaForConditionalGeneration) with "
                   "transformers' models/video_llava/convert_video_llava_weights_to_hf.py first; see "
                   "src/homiebot_planner/README.md, 'HomieBot-7B checkpoints'")


@dataclass(frozen=True)
class HFConfig:
    """Settings of the hf backend.

    Attributes:
        model_path: local directory of a full model or of a PEFT adapter.
        base_model_path: local base model for an adapter whose config names a hub id or a moved directory.
        load_in_4bit: quantize the weights to 4 bit with bitsandbytes while loading.
        device: "cpu", "cuda", "cuda:1", ... or "auto" (accelerate's placement).
        dtype: "auto" (the checkpoint's), "float32", "bfloat16" or "float16".
        constrained: restrict Subtask and Model to valid choices (see constrained.py).
        analysis_max_tokens: cap on the Analysis in constrained decoding.
        observation_mode: "auto" (images for VLMs, text for text LMs), "images" or "text".
        in_context_example: whether untuned use needs the one-example template by default.
        trust_remote_code: allow model code shipped in the directory (MiniCPM-V and similar).
        name: what StepRecord.planner shows (default "hf:<directory name>").
        prefix_cache: reuse the key/value cache of the prompt's constant start across steps and re-samples, and
            decode constrained answers by walking the token trie (fast_decoding.py); text LMs and LLaVA-family
            VLMs (other models always take the plain path). False: the plain generate() path.
    """

    model_path: str
    base_model_path: str = ""
    load_in_4bit: bool = False
    device: str = "cpu"
    dtype: str = "auto"
    constrained: bool = False
    analysis_max_tokens: int = 48
    observation_mode: str = "auto"
    in_context_example: bool = True
    trust_remote_code: bool = False
    name: str = ""
    prefix_cache: bool = True

    def __post_init__(self) -> None:
        if not self.model_path.strip():
            raise ValueError("hf backend needs hf_model_path (a local model or adapter directory)")
        if self.dtype not in _DTYPES:
            raise ValueError(f"hf_dtype must be one of {', '.join(_DTYPES)}, not {self.dtype!r}")
        if self.observation_mode not in _OBSERVATION_MODES:
            raise ValueError(f"hf observation mode must be one of {', '.join(_OBSERVATION_MODES)}, "
                             f"not {self.observation_mode!r}")
        if self.analysis_max_tokens < 1:
            raise ValueError(f"analysis_max_tokens must be >= 1, got {self.analysis_max_tokens}")


@dataclass
class LoadedModel:
    """A model ready for generation.

    Attributes:
        model: the transformers (or PEFT) model, in eval mode.
        tokenizer: its tokenizer.
        processor: the multimodal processor (None for text LMs).
    """

    model: Any
    tokenizer: Any
    processor: Any | None

    @property
    def is_multimodal(self) -> bool:
        """Whether the model takes images."""
        return self.processor is not None


def _torch_dtype(name: str) -> Any:
    import torch

    return "auto" if name == "auto" else getattr(torch, name)


def adapter_stack(path: Path, base_model_path: str = "") -> tuple[Path, list[Path]]:
    """The base model directory and the adapter directories (bottom of the stack first) a model folder stands for.

    A folder without adapter_config.json is a whole model (no adapters). An adapter whose `base_model_name_or_path`
    is itself an adapter folder (a relative name is looked up beside it first) is the next stage of a stack, e.g. a
    DPO adapter over its SFT adapter; `base_model_path` replaces the base named at the bottom.

    Raises:
        BackendError: for a missing folder, an unreadable adapter config, a loop or a missing base model.
    """
    if not path.is_dir():
        raise BackendError(f"hf: model directory {path} does not exist (hf_model_path must be a local directory; "
                           "nothing is downloaded)")
    adapters: list[Path] = []
    current = path
    while (current / ADAPTER_FILE).is_file():
        if len(adapters) == MAX_STACKED_ADAPTERS:
            raise BackendError(f"hf: {path}: more than {MAX_STACKED_ADAPTERS} stacked adapters (a loop of "
                               "base_model_name_or_path?)")
        adapters.insert(0, current)
        try:
            named = json.loads((current / ADAPTER_FILE).read_text(encoding="utf-8")).get("base_model_name_or_path")
        except (OSError, json.JSONDecodeError) as error:
            raise BackendError(f"hf: {current / ADAPTER_FILE}: cannot read: {error}") from None
        named = str(named or "")
        if not named:
            if not base_model_path:
                raise BackendError(f"hf: {current / ADAPTER_FILE} names no base model (base_model_name_or_path); "
                                   "set hf_base_model_path")
            break
        following = Path(named).expanduser()
        if not following.is_absolute() and not following.is_dir():
            following = current / named
        current = following
    if adapters and base_model_path:
        current = Path(base_model_path).expanduser()
    if not current.is_dir():
        raise BackendError(f"hf: the adapter in {adapters[0]} needs its base model, {str(current) or '(unnamed)'}, "
                           "which is not a local directory; set hf_base_model_path")
    return current, adapters


def original_llava_format(directory: Path) -> str:
    """Why `directory` holds a checkpoint in the original LLaVA / Video-LLaVA format, or "" when it does not."""
    if (directory / ORIGINAL_LLAVA_EXTRAS).is_file():
        return f"it holds {ORIGINAL_LLAVA_EXTRAS} (a LoRA checkpoint of the LLaVA training code)"
    try:
        data = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return ""
    if not isinstance(data, dict):
        return ""
    keys = [key for key in ORIGINAL_LLAVA_KEYS if data.get(key)]
    if keys:
        return f"its config.json names {keys[0]} (the original LLaVA / Video-LLaVA format)"
    architectures = [name for name in data.get("architectures") or () if name in ORIGINAL_LLAVA_ARCHITECTURES]
    if architectures:
        return f"its config.json names the architecture {architectures[0]} (the original LLaVA code)"
    return ""


def _refuse_original_llava(directory: Path) -> None:
    reason = original_llava_format(directory)
    if reason:
        raise BackendError(f"hf: {directory} cannot be loaded with transformers: {reason}; {CONVERSION_HINT}")


def load_local_model(config: HFConfig) -> LoadedModel:
    """Load a model (and adapter) from local directories.

    Raises:
        BackendError: when a directory is missing or the model cannot be loaded.
    """
    import transformers
    from transformers import AutoConfig

    _refuse_original_llava(Path(config.model_path).expanduser())
    base, adapters = adapter_stack(Path(config.model_path).expanduser(), config.base_model_path)
    adapter = adapters[-1] if adapters else None
    _refuse_original_llava(base)
    options: dict[str, Any] = {"local_files_only": True, "trust_remote_code": config.trust_remote_code,
                               "dtype": _torch_dtype(config.dtype)}
    if config.load_in_4bit:
        options["quantization_config"] = transformers.BitsAndBytesConfig(  # type: ignore[no-untyped-call]
            load_in_4bit=True, bnb_4bit_quant_type="nf4")
    if config.device == "auto":
        options["device_map"] = "auto"
    elif config.load_in_4bit:
        options["device_map"] = {"": config.device}
    try:
        model_config = AutoConfig.from_pretrained(base, local_files_only=True,
                                                  trust_remote_code=config.trust_remote_code)
        multimodal = hasattr(model_config, "vision_config")
        model_class = transformers.AutoModelForImageTextToText if multimodal else transformers.AutoModelForCausalLM
        model: Any = model_class.from_pretrained(base, **options)
        source = adapter if adapter is not None and _has_tokenizer(adapter) else base
        processor = None
        if multimodal:
            processor = transformers.AutoProcessor.from_pretrained(  # type: ignore[no-untyped-call]
                source, local_files_only=True, trust_remote_code=config.trust_remote_code)
            tokenizer = processor.tokenizer
        else:
            tokenizer = transformers.AutoTokenizer.from_pretrained(source, local_files_only=True,
                                                                   trust_remote_code=config.trust_remote_code)
        if len(adapters) > 1 and config.load_in_4bit:
            raise BackendError(f"hf: {config.model_path}: stacked adapters cannot be merged into 4-bit weights")
        for stage in adapters:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, stage, is_trainable=False)
            if not config.load_in_4bit:
                model = model.merge_and_unload()  # one matrix per layer again: as fast as the base model
    except BackendError:
        raise
    except Exception as error:  # noqa: BLE001 - any loading failure becomes one clear message
        raise BackendError(f"hf: cannot load the model from {config.model_path}: {type(error).__name__}: "
                           f"{' '.join(str(error).split())[:300]}") from None
    if config.device not in ("auto",) and not config.load_in_4bit:
        model = model.to(config.device)
    model.eval()
    return LoadedModel(model=model, tokenizer=tokenizer, processor=processor)


def trained_prompt(directory: Path) -> dict[str, Any] | None:
    """The prompt record of a checkpoint trained here ({"system_prompt": text or None, "answer_style": "analysis" or
    "decision", "object_locations": bool}), None when it has none. Records written before answer styles existed mean
    "analysis"; before object locations existed, no locations.

    Raises:
        BackendError: when the file exists but is malformed.
    """
    path = directory / PROMPT_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise BackendError(f"hf: {path}: cannot read: {error}") from None
    prompt = record.get("system_prompt") if isinstance(record, dict) else ""
    if prompt is not None and not isinstance(prompt, str):
        raise BackendError(f"hf: {path}: system_prompt must be a string or null")
    style = record.get("answer_style", "analysis")
    if style not in ANSWER_STYLES:
        raise BackendError(f"hf: {path}: answer_style must be one of {', '.join(ANSWER_STYLES)}, not {style!r}")
    locations = record.get("object_locations", False)
    if not isinstance(locations, bool):
        raise BackendError(f"hf: {path}: object_locations must be true or false")
    return {"system_prompt": prompt, "answer_style": style, "object_locations": locations}


def _has_tokenizer(directory: Path) -> bool:
    return any((directory / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model"))


def _image_token(processor: Any) -> str:
    return str(getattr(processor, "image_token", None) or "<image>")


def chat_prompt(loaded: LoadedModel, messages: tuple[ChatMessage, ...]) -> tuple[str, bool]:
    """The prompt text ending where the assistant answers, and whether it came from a chat template.

    Uses the processor's (VLMs) or tokenizer's chat template when present; otherwise the release's plain format
    `{system}\\n\\nUSER:\\n{text}ASSISTANT:\\n{answer}\\n...ASSISTANT:\\n` with one image token per image.
    """
    owner: Any = loaded.processor if loaded.is_multimodal else loaded.tokenizer
    if getattr(owner, "chat_template", None):
        converted: list[dict[str, Any]] = []
        for message in messages:
            if loaded.is_multimodal:
                content: Any = [{"type": "image"} for _ in message.images] + [{"type": "text", "text": message.text}]
            else:
                content = message.text
            converted.append({"role": message.role, "content": content})
        return owner.apply_chat_template(converted, add_generation_prompt=True, tokenize=False), True
    parts: list[str] = []
    for message in messages:
        if message.role == "system":
            parts.append(message.text + "\n\n")
        elif message.role == "user":
            images = (_image_token(loaded.processor) * len(message.images) + "\n") if message.images else ""
            parts.append(f"USER:\n{images}{message.text}")
        else:
            parts.append(f"ASSISTANT:\n{message.text}\n")
    parts.append("ASSISTANT:\n")
    return "".join(parts), False


class HFBackend(PlannerBackend):
    """A local transformers model as planner.

    Args:
        config: where the model is and how to decode.
        loaded: an already loaded model (the smollm2 backend and tests pass one); loaded from `config` otherwise.
    """

    def __init__(self, config: HFConfig, loaded: LoadedModel | None = None) -> None:
        self.config = config
        self.loaded = loaded or load_local_model(config)
        self.name = config.name or f"hf:{Path(config.model_path).name}"
        if config.observation_mode == "auto":
            self.observation_mode = "images" if self.loaded.is_multimodal else "text"
        else:
            self.observation_mode = config.observation_mode  # type: ignore[assignment]
        if self.observation_mode == "images" and not self.loaded.is_multimodal:
            raise BackendError(f"hf: {config.model_path} is a text-only model; it cannot take images "
                               "(use observation mode 'text' or 'auto')")
        self.default_in_context_example = config.in_context_example
        self.trained_prompt = trained_prompt(Path(config.model_path).expanduser())
        self.object_locations = None if self.trained_prompt is None else self.trained_prompt["object_locations"]
        decision_only = self.trained_prompt is not None and self.trained_prompt["answer_style"] == "decision"
        self.analysis_max_tokens = 0 if decision_only else config.analysis_max_tokens
        self.fast = FastDecoding(self.loaded.model, self.loaded.tokenizer, self.loaded.is_multimodal)

    def system_prompt(self, protocol_prompt: str) -> str | None:
        """The system prompt the model was trained with (its planner_prompt.json), else the protocol's."""
        if self.trained_prompt is None:
            return protocol_prompt
        return self.trained_prompt.get("system_prompt")

    def _encoder(self, messages: tuple[ChatMessage, ...], templated: bool) -> Any:
        loaded = self.loaded
        processor: Any = loaded.processor
        device = loaded.model.device
        images = [_to_pil(image) for image in messages[-1].images] if messages else []

        def encode(text: str) -> Any:
            if loaded.is_multimodal:
                inputs = processor(text=text, images=images or None, return_tensors="pt")
            else:
                inputs = loaded.tokenizer(text, return_tensors="pt", add_special_tokens=not templated)
            return inputs.to(device)

        return encode

    def generate(self, request: GenerationRequest) -> str:
        """One sample; constrained when the config says so.

        Raises:
            BackendError: when generation fails.
        """
        import torch

        prompt, templated = chat_prompt(self.loaded, request.messages)
        encode = self._encoder(request.messages, templated)
        tokenizer = self.loaded.tokenizer
        try:
            with torch.inference_mode():
                fast = self.config.prefix_cache and self.fast.supported
                if self.config.constrained and fast:
                    rule = SamplingRule.for_request(request.temperature, self.loaded.model.generation_config)
                    return self.fast.constrained_answer(encode, prompt, request.constraints, rule,
                                                        self.analysis_max_tokens, request.cancel)
                if self.config.constrained:
                    return constrained_answer(self.loaded.model, tokenizer, encode, prompt, request.constraints,
                                              request.temperature, self.analysis_max_tokens, request.cancel,
                                              reuse_cache=not self.loaded.is_multimodal)
                inputs = encode(prompt)
                pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
                options: dict[str, Any] = {"pad_token_id": pad, **sampling_arguments(request.temperature)}
                if request.cancel is not None:
                    from transformers import StoppingCriteriaList

                    options["stopping_criteria"] = StoppingCriteriaList([make_cancel_criteria(request.cancel)])
                if fast:
                    output = self.fast.generate(inputs, max_new_tokens=request.max_new_tokens, **options)
                else:
                    output = self.loaded.model.generate(**inputs, max_new_tokens=request.max_new_tokens, **options)
        except (RuntimeError, ValueError, IndexError) as error:
            raise BackendError(f"hf: generation failed: {type(error).__name__}: {error}") from None
        text = str(tokenizer.decode(output[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True))
        return text if self.analysis_max_tokens else with_analysis_line(text)


def _to_pil(image: Any) -> Any:
    from PIL import Image

    return Image.fromarray(image)
