"""Fixtures of the homiebot_planner tests: tiny local models built from config (nothing is downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest


def _train_tokenizer() -> object:
    """A byte-level BPE tokenizer trained on the planner's own prompts, with the special tokens the tests need."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from homiebot_planner.prompts import in_context_example, system_prompt

    example = in_context_example()
    corpus = [system_prompt("images"), system_prompt("text"), example.user, example.assistant] * 4
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>", "<pad>", "<image>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(corpus, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<pad>")


def _text_config(vocabulary: int) -> object:
    from transformers import LlamaConfig

    # hidden size 64: bitsandbytes' 4-bit blocks need at least 64 values per row.
    return LlamaConfig(vocab_size=vocabulary, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096,
                       bos_token_id=1, eos_token_id=2, pad_token_id=3)


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Directories of tiny random models: `lm` (Llama, no chat template), `chat_lm` (with a chat template),
    `vlm` (LLaVA with a CLIP tower, 64x64 images, 4 tokens per image) and `adapter` (a LoRA adapter on `lm`)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaForCausalLM,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("tiny_models")
    tokenizer = _train_tokenizer()
    text_config = _text_config(len(tokenizer))
    LlamaForCausalLM(text_config).save_pretrained(root / "lm")
    tokenizer.save_pretrained(root / "lm")

    LlamaForCausalLM(text_config).save_pretrained(root / "chat_lm")
    tokenizer.chat_template = (
        "{% for message in messages %}<s>{{ message['role'] }}\n{{ message['content'] }}</s>\n{% endfor %}"
        "{% if add_generation_prompt %}<s>assistant\n{% endif %}"
    )
    tokenizer.save_pretrained(root / "chat_lm")
    tokenizer.chat_template = None

    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                              image_size=64, patch_size=32)
    image_token = tokenizer.convert_tokens_to_ids("<image>")
    LlavaForConditionalGeneration(LlavaConfig(vision_config=vision, text_config=text_config, image_token_id=image_token,
                                              vision_feature_layer=-1)).save_pretrained(root / "vlm")
    image_processor = CLIPImageProcessor(size={"shortest_edge": 64}, crop_size={"height": 64, "width": 64})
    LlavaProcessor(image_processor=image_processor, tokenizer=tokenizer, patch_size=32,
                   vision_feature_select_strategy="default", num_additional_image_tokens=1,
                   image_token="<image>").save_pretrained(root / "vlm")

    base = LlamaForCausalLM.from_pretrained(root / "lm")
    get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"])).save_pretrained(root / "adapter")
    return {name: root / name for name in ("lm", "chat_lm", "vlm", "adapter")}
