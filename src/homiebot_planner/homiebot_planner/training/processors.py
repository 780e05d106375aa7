"""Loading a vision-language model's processor for training, also where its video processor would need torchvision."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from homiebot_planner.training.config import TrainingSetupError


def load_processor(model_dir: Path) -> Any:
    """The model's processor; when its video processor needs the missing torchvision, one built without it.

    Qwen2-VL-style processors include a video processor that imports torchvision. Planner samples hold still
    images only, so the processor is rebuilt from its image processor and tokenizer with no video part (a
    checkpoint saved that way has no video processor config, which the same fallback handles).
    """
    from transformers import AutoProcessor

    try:
        return AutoProcessor.from_pretrained(model_dir)
    except (ImportError, ValueError, OSError) as error:
        message = str(error).lower()
        if "torchvision" not in message and "video processor" not in message:
            raise
        return _processor_without_video(Path(model_dir))


def _processor_without_video(model_dir: Path) -> Any:
    import transformers
    from transformers import AutoImageProcessor, AutoTokenizer

    config_file = model_dir / "processor_config.json"
    declared = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    class_name = declared.get("processor_class")
    tokenizer_config_file = model_dir / "tokenizer_config.json"
    if class_name is None and tokenizer_config_file.is_file():
        class_name = json.loads(tokenizer_config_file.read_text(encoding="utf-8")).get("processor_class")
    processor_class = getattr(transformers, str(class_name), None)
    if processor_class is None:
        raise TrainingSetupError(f"{model_dir}: cannot tell its processor class; install torchvision to load it")
    processor_class = without_video_processor(processor_class)
    template_file = model_dir / "chat_template.jinja"
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    chat_template = template_file.read_text(encoding="utf-8") if template_file.is_file() else tokenizer.chat_template
    extra = {key: value for key, value in declared.items() if key not in ("processor_class", "chat_template")
             and not key.endswith("_processor")}
    return processor_class(image_processor=AutoImageProcessor.from_pretrained(model_dir), tokenizer=tokenizer,
                           chat_template=chat_template, **extra)


def without_video_processor(processor_class: type) -> type:
    """A subclass of `processor_class` that has no video processor (so it needs no torchvision).

    transformers builds, checks and saves a processor from the modality arguments of its `__init__`, passed
    positionally in signature order; dropping a trailing `video_processor` keeps that order intact.

    Raises:
        TrainingSetupError: when the video processor is not the last modality argument of `processor_class`.
    """
    attributes = list(processor_class.get_attributes())  # type: ignore[attr-defined]
    if "video_processor" in attributes and attributes[-1] != "video_processor":
        raise TrainingSetupError(f"{processor_class.__name__} cannot be built without its video processor here; "
                                 "install torchvision")

    class ProcessorWithoutVideo(processor_class):  # type: ignore[misc, valid-type]
        @classmethod
        def get_attributes(cls) -> list[str]:
            return [name for name in attributes if name != "video_processor"]

    ProcessorWithoutVideo.__name__ = ProcessorWithoutVideo.__qualname__ = processor_class.__name__
    return ProcessorWithoutVideo
