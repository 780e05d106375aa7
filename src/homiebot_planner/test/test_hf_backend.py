"""The hf backend with tiny models built from config: text LM, chat template, LLaVA with four images, PEFT, 4-bit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from homiebot_planner.backends import BackendError, HFConfig
from homiebot_planner.backends.hf import HFBackend, chat_prompt
from homiebot_planner.planner import Observation, Planner, PlannerConfig
from homiebot_planner.prompts import system_prompt

VIEWS = ("front", "left", "back", "right")


def _observation() -> Observation:
    generator = np.random.default_rng(0)
    return Observation(images={view: generator.integers(0, 255, (256, 256, 3), dtype=np.uint8) for view in VIEWS},
                       visible={"front": ["013_apple"], "back": ["fridge"]})


def _spy_generate(backend: HFBackend) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    original = backend.loaded.model.generate

    def generate(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return original(**kwargs)

    backend.loaded.model.generate = generate  # type: ignore[method-assign]
    return calls


def test_text_lm_without_template_gets_the_release_format(tiny_models: dict[str, Path]) -> None:
    backend = HFBackend(HFConfig(model_path=str(tiny_models["lm"])))
    assert backend.observation_mode == "text" and backend.name == "hf:lm" and backend.default_in_context_example
    planner = Planner(backend, "put the apple in the fridge", PlannerConfig(max_new_tokens=8, max_samples=2))
    observation = _observation()
    prompt, templated = chat_prompt(backend.loaded, planner.messages(observation, planner.user_message(observation)))
    assert not templated
    assert prompt == (system_prompt("text") + "\n\nUSER:\nVisible objects:\nfront: apple\nleft: None\nback: fridge\n"
                      "right: None\nTask: put the apple in the fridge\nInventory: None\nHistorical Execution: None\n"
                      "Feedback: None\nNow based on the instruction above, please output Analysis, Subtask and Model "
                      "in the mentioned format.ASSISTANT:\n")
    calls = _spy_generate(backend)
    decision = planner.decide(observation)
    assert len(calls) == decision.samples and calls[0]["max_new_tokens"] == 8 and calls[0]["do_sample"]
    assert "pixel_values" not in calls[0]


def test_chat_template_is_used(tiny_models: dict[str, Path]) -> None:
    backend = HFBackend(HFConfig(model_path=str(tiny_models["chat_lm"])))
    planner = Planner(backend, "t")
    observation = Observation()
    prompt, templated = chat_prompt(backend.loaded, planner.messages(observation, planner.user_message(observation)))
    assert templated
    assert prompt.startswith("<s>system\n" + system_prompt("text") + "</s>\n<s>user\nVisible objects:")
    assert prompt.endswith("<s>assistant\n")


def test_llava_gets_four_images(tiny_models: dict[str, Path]) -> None:
    backend = HFBackend(HFConfig(model_path=str(tiny_models["vlm"])))
    assert backend.observation_mode == "images" and backend.loaded.is_multimodal
    calls = _spy_generate(backend)
    planner = Planner(backend, "put the apple in the fridge", PlannerConfig(max_new_tokens=8, max_samples=1))
    planner.decide(_observation())
    inputs = calls[0]
    assert tuple(inputs["pixel_values"].shape) == (4, 3, 64, 64)
    image_token = backend.loaded.tokenizer.convert_tokens_to_ids("<image>")
    assert int((inputs["input_ids"] == image_token).sum()) == 4 * 4  # 4 images x (64/32)^2 patches
    first_user = backend.loaded.processor.decode(inputs["input_ids"][0]).split("USER:\n", 1)[1]
    assert first_user.startswith("<image>" * 16 + "\nTask: put the apple in the fridge")


def test_peft_adapter_directory(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    backend = HFBackend(HFConfig(model_path=str(tiny_models["adapter"]), constrained=True, analysis_max_tokens=4))
    assert type(backend.loaded.model).__name__ != "PeftModel"  # merged into the base at load time
    decision = Planner(backend, "t").decide(_observation())
    assert decision.valid and not decision.gave_up
    moved = tmp_path / "adapter"
    shutil.copytree(tiny_models["adapter"], moved)
    config = json.loads((moved / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "HuggingFaceTB/not-local"
    (moved / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(BackendError, match="not a local directory; set hf_base_model_path"):
        HFBackend(HFConfig(model_path=str(moved)))
    assert HFBackend(HFConfig(model_path=str(moved), base_model_path=str(tiny_models["lm"]))).loaded is not None


def test_stacked_adapters_are_merged_stage_by_stage(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    stack = tmp_path / "stack"
    for folder, seed in ((stack / "sft", 1), (stack, 2)):  # a DPO-like stage over an SFT-like one, both non-zero
        torch.manual_seed(seed)
        get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_models["lm"]),
                       LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
                       ).save_pretrained(folder)
    top = json.loads((stack / "adapter_config.json").read_text())
    (stack / "adapter_config.json").write_text(json.dumps({**top, "base_model_name_or_path": "sft"}))
    expected = AutoModelForCausalLM.from_pretrained(tiny_models["lm"])
    for folder in (stack / "sft", stack):
        expected = PeftModel.from_pretrained(expected, folder).merge_and_unload()
    ids = torch.tensor([[1, 2, 3, 4, 5]])

    loaded = HFBackend(HFConfig(model_path=str(stack))).loaded.model
    assert torch.allclose(loaded(ids).logits, expected(ids).logits, atol=1e-5)
    only_top = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_models["lm"]), stack)
    assert not torch.allclose(only_top.merge_and_unload()(ids).logits, expected(ids).logits, atol=1e-3)
    (stack / "adapter_config.json").write_text(json.dumps({**top, "base_model_name_or_path": str(stack)}))
    with pytest.raises(BackendError, match="more than 8 stacked adapters"):
        HFBackend(HFConfig(model_path=str(stack)))


def test_a_checkpoint_trained_without_a_system_turn_is_prompted_without_one(tiny_models: dict[str, Path],
                                                                            tmp_path: Path) -> None:
    trained = tmp_path / "trained"
    shutil.copytree(tiny_models["adapter"], trained)
    untouched = Planner(HFBackend(HFConfig(model_path=str(trained))), "t")
    assert untouched.messages(_observation(), "u")[0].text == system_prompt("text")
    (trained / "planner_prompt.json").write_text(json.dumps({"system_prompt": None}))
    planner = Planner(HFBackend(HFConfig(model_path=str(trained))), "t")
    assert [message.role for message in planner.messages(_observation(), "u")] == ["user"]
    (trained / "planner_prompt.json").write_text(json.dumps({"system_prompt": "Plan the next subtask."}))
    planner = Planner(HFBackend(HFConfig(model_path=str(trained))), "t")
    assert planner.messages(_observation(), "u")[0].text == "Plan the next subtask."
    (trained / "planner_prompt.json").write_text(json.dumps({"system_prompt": 3}))
    with pytest.raises(BackendError, match="system_prompt must be a string or null"):
        HFBackend(HFConfig(model_path=str(trained)))


def test_a_checkpoint_shows_object_locations_as_its_training_data_did(tiny_models: dict[str, Path],
                                                                       tmp_path: Path) -> None:
    trained = tmp_path / "trained"
    shutil.copytree(tiny_models["adapter"], trained)
    observation = Observation(visible={"front": ["013_apple"]}, locations={"front": ["on frl_apartment_sofa"]})
    cases = [({"system_prompt": None}, "front: apple\n"),  # a record from before locations existed: none
             ({"system_prompt": None, "object_locations": True}, "front: apple (on sofa)\n"),
             ({"system_prompt": None, "object_locations": False}, "front: apple\n")]
    for record, line in cases:
        (trained / "planner_prompt.json").write_text(json.dumps(record))
        planner = Planner(HFBackend(HFConfig(model_path=str(trained))), "t", PlannerConfig(object_locations=True))
        assert line in planner.user_message(observation)
    untrained = Planner(HFBackend(HFConfig(model_path=str(tiny_models["lm"]))), "t")  # no record: the setting decides
    assert "front: apple (on sofa)\n" in untrained.user_message(observation)
    (trained / "planner_prompt.json").write_text(json.dumps({"system_prompt": None, "object_locations": "yes"}))
    with pytest.raises(BackendError, match="object_locations must be true or false"):
        HFBackend(HFConfig(model_path=str(trained)))


def test_four_bit_loading(tiny_models: dict[str, Path]) -> None:
    pytest.importorskip("bitsandbytes")
    backend = HFBackend(HFConfig(model_path=str(tiny_models["lm"]), load_in_4bit=True, constrained=True,
                                 analysis_max_tokens=4))
    layer = backend.loaded.model.model.layers[0].self_attn.q_proj
    assert type(layer).__name__ == "Linear4bit"
    assert Planner(backend, "t").decide(_observation()).valid


def test_missing_or_wrong_models_are_clear_errors(tiny_models: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="does not exist"):
        HFBackend(HFConfig(model_path=str(tmp_path / "nothing")))
    with pytest.raises(BackendError, match="cannot load the model"):
        HFBackend(HFConfig(model_path=str(tmp_path)))
    with pytest.raises(BackendError, match="text-only model"):
        HFBackend(HFConfig(model_path=str(tiny_models["lm"]), observation_mode="images"))
    with pytest.raises(ValueError, match="hf_dtype"):
        HFConfig(model_path="x", dtype="int3")
    with pytest.raises(ValueError, match="hf_model_path"):
        HFConfig(model_path="")


def test_original_video_llava_checkpoints_are_refused_with_the_conversion(tmp_path: Path) -> None:
    # config.json as the Video-LLaVA training code writes it (the released HomieBot-7B format); no weights needed.
    full = tmp_path / "HomieBot-7B-DPO"
    full.mkdir()
    (full / "config.json").write_text(json.dumps({
        "architectures": ["LlavaLlamaForCausalLM"], "model_type": "llava", "hidden_size": 4096,
        "mm_image_tower": "LanguageBind/LanguageBind_Image", "mm_video_tower": "LanguageBind/LanguageBind_Video_merge",
        "mm_projector_type": "mlp2x_gelu", "mm_use_im_patch_token": False}), encoding="utf-8")
    with pytest.raises(BackendError, match=r"names mm_image_tower .*convert_video_llava_weights_to_hf\.py"):
        HFBackend(HFConfig(model_path=str(full)))
    lora = tmp_path / "homiebot-7b-sft-lora"
    lora.mkdir()
    (lora / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "LanguageBind/Video-LLaVA-7B"}),
                                              encoding="utf-8")
    (lora / "non_lora_trainables.bin").write_bytes(b"")
    with pytest.raises(BackendError, match="non_lora_trainables.bin .*HomieBot-7B checkpoints"):
        HFBackend(HFConfig(model_path=str(lora)))


def test_cancel_stops_generation(tiny_models: dict[str, Path]) -> None:
    import threading

    from homiebot_planner.backends import GenerationRequest

    backend = HFBackend(HFConfig(model_path=str(tiny_models["lm"])))
    planner = Planner(backend, "t")
    messages = planner.messages(Observation(), planner.user_message(Observation()))
    cancel = threading.Event()
    cancel.set()
    calls = _spy_generate(backend)
    backend.generate(GenerationRequest(messages=messages, max_new_tokens=64, temperature=0.0, cancel=cancel))
    backend.generate(GenerationRequest(messages=messages, max_new_tokens=64, temperature=0.0))
    assert len(calls) == 2 and "stopping_criteria" in calls[0] and "stopping_criteria" not in calls[1]
    cancelled, full = (len(backend.loaded.tokenizer(text)["input_ids"]) for text in (
        backend.generate(GenerationRequest(messages=messages, max_new_tokens=64, temperature=0.0, cancel=cancel)),
        backend.generate(GenerationRequest(messages=messages, max_new_tokens=64, temperature=0.0))))
    assert cancelled <= 2 < full
