"""Tiny planner models built from config (nothing downloaded), for tests, benchmarks and dry runs of the pipeline.

* `build_tiny_text_model`: a Llama causal LM (hidden 64, 2 layers) with a byte-level BPE tokenizer trained on the
  given texts by `tokenizers`, and a small chat template.
* `build_tiny_vlm`: a LlavaForConditionalGeneration with a CLIP vision tower (256x256 images, patch 32, so 64
  image tokens per image) around the same kind of language model, saved with its LlavaProcessor.
* `build_tiny_qwen2_vl`: a Qwen2VLForConditionalGeneration (81 image tokens per 256x256 image) saved with a
  Qwen2VLProcessor that has no video processor (this machine has no torchvision).

Both are saved with `save_pretrained` and load back with the Auto classes, like any local checkpoint.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import LlamaConfig, PreTrainedTokenizerFast

SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<s>", "<|end|>", "<image>", "<|system|>", "<|user|>", "<|assistant|>")
# Role header, content, end marker; string content or trl's structured content (image placeholders as <image>).
CHAT_TEMPLATE = (
    "{%- for message in messages -%}<|{{ message['role'] }}|>\n"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}<image>{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}<|end|>\n"
    "{%- endfor -%}{%- if add_generation_prompt -%}<|assistant|>\n{%- endif -%}"
)
IMAGE_SIZE = 256
PATCH_SIZE = 32


def build_tokenizer(texts: Iterable[str], vocab_size: int = 1000, image_token: str = "<image>",
                    extra_tokens: tuple[str, ...] = (), chat_template: str = CHAT_TEMPLATE) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on `texts`, with a chat template and the special tokens above.

    Args:
        texts: the training corpus.
        vocab_size: the target vocabulary size.
        image_token: the token processors expand into image features.
        extra_tokens: further special tokens (e.g. Qwen2-VL's vision markers).
        chat_template: the Jinja chat template.

    Returns:
        a transformers fast tokenizer (eos `<|end|>`, pad `<pad>`, bos `<s>`).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    specials = list(dict.fromkeys([*SPECIAL_TOKENS, image_token, *extra_tokens]))
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(texts, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, pad_token="<pad>", bos_token="<s>",
                                        eos_token="<|end|>", extra_special_tokens={"image_token": image_token})
    tokenizer.chat_template = chat_template
    return tokenizer


def token_id(tokenizer: PreTrainedTokenizerFast, token: str) -> int:
    """The id of one token of the tokenizer's vocabulary.

    Raises:
        ValueError: when `token` is not a single token.
    """
    found = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(found, int):
        raise ValueError(f"{token!r} is not a single token of the tokenizer")
    return found


def _text_config(tokenizer: PreTrainedTokenizerFast, initializer_range: float) -> LlamaConfig:
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                       initializer_range=initializer_range, pad_token_id=tokenizer.pad_token_id,
                       bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)


def build_tiny_text_model(out_dir: Path, texts: Iterable[str], seed: int = 0, initializer_range: float = 0.1) -> Path:
    """Save a tiny Llama causal LM and its tokenizer (trained on `texts`) to `out_dir`.

    Returns:
        out_dir.
    """
    import torch
    from transformers import LlamaForCausalLM

    tokenizer = build_tokenizer(texts)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(_text_config(tokenizer, initializer_range))
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return Path(out_dir)


def build_tiny_vlm(out_dir: Path, texts: Iterable[str], seed: int = 0, initializer_range: float = 0.1) -> Path:
    """Save a tiny LLaVA (CLIP vision tower, 256x256 images, patch 32) and its processor to `out_dir`.

    Returns:
        out_dir.
    """
    import torch
    from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlavaConfig, LlavaForConditionalGeneration,
                              LlavaProcessor)

    tokenizer = build_tokenizer(texts)
    image_processor = CLIPImageProcessor(size={"shortest_edge": IMAGE_SIZE},
                                         crop_size={"height": IMAGE_SIZE, "width": IMAGE_SIZE})
    # "default" feature selection drops CLIP's CLS token, which num_additional_image_tokens=1 accounts for.
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=PATCH_SIZE,
                               vision_feature_select_strategy="default", chat_template=CHAT_TEMPLATE,
                               num_additional_image_tokens=1)
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                              image_size=IMAGE_SIZE, patch_size=PATCH_SIZE, projection_dim=32)
    config = LlavaConfig(vision_config=vision, text_config=_text_config(tokenizer, initializer_range),
                         image_token_index=token_id(tokenizer, "<image>"),
                         vision_feature_select_strategy="default", vision_feature_layer=-1)
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return Path(out_dir)


QWEN2_VL_CHAT_TEMPLATE = CHAT_TEMPLATE.replace("<image>", "<|vision_start|><|image_pad|><|vision_end|>")


def build_tiny_qwen2_vl(out_dir: Path, texts: Iterable[str], seed: int = 0, initializer_range: float = 0.1) -> Path:
    """Save a tiny Qwen2-VL (one vision block, patch 14, 2x2 merge) and its processor, without a video processor.

    A 256x256 image becomes 18x18 patches of 14 pixels (resized to 252x252), merged 2x2 into 81 image tokens.

    Returns:
        out_dir.
    """
    import torch
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2VLProcessor
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    from homiebot_planner.training.processors import without_video_processor

    tokenizer = build_tokenizer(texts, image_token="<|image_pad|>", chat_template=QWEN2_VL_CHAT_TEMPLATE,
                                extra_tokens=("<|vision_start|>", "<|vision_end|>", "<|video_pad|>"))
    image_processor = Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=IMAGE_SIZE * IMAGE_SIZE, patch_size=14,
                                               merge_size=2, temporal_patch_size=2)
    processor = without_video_processor(Qwen2VLProcessor)(image_processor=image_processor, tokenizer=tokenizer,
                                                           chat_template=QWEN2_VL_CHAT_TEMPLATE)
    text = _text_config(tokenizer, initializer_range).to_dict()
    text["rope_scaling"] = {"type": "mrope", "mrope_section": [2, 3, 3]}  # sums to head_dim / 2 = 8
    config = Qwen2VLConfig(
        text_config=text,
        vision_config={"depth": 1, "embed_dim": 32, "num_heads": 2, "hidden_size": 64, "patch_size": 14,
                       "spatial_merge_size": 2, "temporal_patch_size": 2, "mlp_ratio": 2},
        image_token_id=token_id(tokenizer, "<|image_pad|>"),
        video_token_id=token_id(tokenizer, "<|video_pad|>"),
        vision_start_token_id=token_id(tokenizer, "<|vision_start|>"),
        vision_end_token_id=token_id(tokenizer, "<|vision_end|>"))
    torch.manual_seed(seed)
    model = Qwen2VLForConditionalGeneration(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(out_dir)
    processor.save_pretrained(out_dir)
    return Path(out_dir)
