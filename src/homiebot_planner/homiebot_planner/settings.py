"""The planner node's parameters and how they become typed configs (no ROS here, so it is unit-tested directly).

Every ROS parameter of the node is listed in `PARAMETER_DEFAULTS` with its default; `build_settings` turns a
mapping of values into the node config, the planner-loop config and the config of the chosen backend.

Three loop settings default to "auto", which follows the chosen backend as the EMMOE release does (docs/fidelity.md):
- `parser`: "release_bracket" for openai (the release's API scripts use only the bracketed pattern), "release" for
  hf (its open-model scripts), "strict" for homiebot, smollm2, mock, expert and random, whose answers are well-formed by
  construction (constrained decoding, scripts, generated text), so every parser reads them the same way;
- `temperature`: none sent for openai (the API's default, as the release's GPT-4o/Gemini scripts), 0 (greedy) for
  homiebot, HomieBot-135M (chosen on held-out train tasks: task progress 18.5 % greedy against 14.8 % at 0.2), 0.2
  otherwise (the release's HomieBot loop); "none" sends none for any backend, a number forces it;
- `max_new_tokens`: 300 for openai (the release's `max_tokens`), 1024 otherwise (the HomieBot loop).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from emmoe_core.robot.naming import FAR_THRESHOLD_M

from homiebot_planner.backends import (
    BACKEND_KINDS,
    BackendConfig,
    ExpertConfig,
    HFConfig,
    MockConfig,
    OpenAIConfig,
    OracleConfig,
    RandomConfig,
    SmolLM2Config,
)
from homiebot_planner.backends.dagger import DaggerConfig
from homiebot_planner.backends.smollm2 import default_adapter_dir
from homiebot_planner.planner import PlannerConfig

TRI_STATE = ("auto", "true", "false")
AUTO = "auto"
# Parameters taking a TRI_STATE value.
TRI_STATE_PARAMETERS = ("in_context_example", "constrained_decoding")
# Parameters declared with dynamic typing: a string ("auto", "none") or a bool/number given on the command line.
DYNAMIC_TYPED_PARAMETERS = (*TRI_STATE_PARAMETERS, "temperature", "max_new_tokens")
# What "auto" means per backend kind: (parser, temperature, max_new_tokens); None = no temperature sent.
API_DEFAULTS: tuple[str, float | None, int] = ("release_bracket", None, 300)
BACKEND_DEFAULTS: dict[str, tuple[str, float | None, int]] = {
    "openai": API_DEFAULTS,
    "hf": ("release", 0.2, 1024),
    "homiebot": ("strict", 0.0, 1024),
}
LOCAL_DEFAULTS: tuple[str, float | None, int] = ("strict", 0.2, 1024)
# What "auto" means for target_names per backend kind ("visible" for the others).
TARGET_NAMES_DEFAULTS: dict[str, str] = {"homiebot": "vocabulary"}

PARAMETER_DEFAULTS: dict[str, Any] = {
    # Which backend plans: homiebot (the trained default), smollm2 (untuned), mock, expert, openai, hf or random.
    "backend": "homiebot",
    # The planning loop (EMMOE defaults).
    "max_steps": 20,
    "max_samples": 5,
    # 0: the release sends no conversation history (3 is its defined but unused window).
    "history_window": 0,
    "request_variant": "live",
    "in_context_example": "auto",
    # "auto" (per backend, see the module docstring), or a value.
    "parser": AUTO,
    "temperature": AUTO,
    "max_new_tokens": AUTO,
    "require_valid": False,
    "release_image_order": False,
    "hand_rules": True,
    "object_rules": True,
    "no_repeat": True,
    # Text observations: where each visible small object rests (`apple (on sofa)`).
    "object_locations": True,
    # Constrained decoding for local backends: auto = on for homiebot and smollm2, off for hf.
    "constrained_decoding": "auto",
    # What constrained decoding may name: auto (per backend, see TARGET_NAMES_DEFAULTS), visible or vocabulary.
    "target_names": "auto",
    "analysis_max_tokens": 48,
    # Local backends: reuse the prompt's constant start and walk the token trie (false: the plain generate() path).
    "prefix_cache": True,
    # The ROS side of a run.
    "executor_timeout_s": 300.0,
    "observation_timeout_s": 30.0,
    "reset_timeout_s": 120.0,
    "server_wait_s": 10.0,
    "data_dir": "",
    "tasks_file": "",
    "reset_simulator": True,
    "conversation_dir": "",
    "record_views": True,
    # mock
    "mock_outputs": [""],
    "mock_file": "",
    "mock_observation_mode": "images",
    # expert: "info" replays the successful subtasks of the task's info.txt (the annotated trajectory; the default),
    # "keypath" follows keypath.json, "replay" every info.txt block, failures included (homiebot collect), "plan".
    "expert_source": "info",
    "expert_plan": [""],
    # oracle (the re-planning expert, training and evaluation only): targets farther than this are walked up to
    # (the executor's D1 limit, far_threshold; set both together).
    "oracle_reach_m": FAR_THRESHOLD_M,
    # On-policy collection: with a rows folder, the backend above is the student and the oracle answers every step
    # too (its answer executed with probability dagger_beta); rows land in <dagger_rows_dir>/<episode>__<run>.jsonl.
    "dagger_rows_dir": "",
    "dagger_beta": 0.0,
    "dagger_seed": 0,
    # openai
    "openai_model": "gpt-4o",
    "openai_base_url": "https://api.openai.com/v1",
    "openai_api_key_env": "OPENAI_API_KEY",
    "openai_timeout_s": 60.0,
    "openai_max_retries": 3,
    "openai_backoff_s": 1.0,
    "openai_send_images": True,
    "openai_text_first": False,
    # hf
    "hf_model_path": "",
    "hf_base_model_path": "",
    "hf_load_in_4bit": False,
    "hf_device": "cpu",
    "hf_dtype": "auto",
    "hf_observation_mode": "auto",
    "hf_trust_remote_code": False,
    # random (the random-valid-action baseline)
    "random_seed": 0,
    "random_end_probability": 0.05,
    # smollm2 and homiebot (HomieBot-135M: smollm2 with the trained adapter; "" = $HOMIEBOT_ROOT/models/homiebot-135m)
    "smollm2_cache_dir": "",
    "homiebot_adapter_dir": "",
    "num_threads": 0,
}


@dataclass(frozen=True)
class NodeConfig:
    """Settings of the planner node itself.

    Attributes:
        max_steps: default planner step limit of a run (a goal's max_steps overrides it when > 0).
        executor_timeout_s: how long to wait for /subtask's result before the step is recorded failed.
        observation_timeout_s: how long to wait for /sim/get_observation.
        reset_timeout_s: how long to wait for /sim/reset_episode.
        server_wait_s: how long to wait for a service or action server to appear.
        data_dir: EMMOE data folder (train/ and test/ with info.txt, keypath.json, scene.json) or "".
        tasks_file: task list `id<TAB>instruction` or "".
        reset_simulator: reset the simulator with the task's scene.json at the start of a run when it exists.
        conversation_dir: write `<dir>/<episode>/<run>/conversation.json` after every run ("" = do not write).
        record_views: put the four views in each StepRecord.
    """

    max_steps: int = 20
    executor_timeout_s: float = 300.0
    observation_timeout_s: float = 30.0
    reset_timeout_s: float = 120.0
    server_wait_s: float = 10.0
    data_dir: str = ""
    tasks_file: str = ""
    reset_simulator: bool = True
    conversation_dir: str = ""
    record_views: bool = True

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        for name in ("executor_timeout_s", "observation_timeout_s", "reset_timeout_s", "server_wait_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class Settings:
    """Everything the node is configured with."""

    node: NodeConfig
    planner: PlannerConfig
    backend: BackendConfig
    in_context_example: str
    dagger: DaggerConfig | None = None
    oracle: OracleConfig = OracleConfig()


def _strings(value: Any) -> tuple[str, ...]:
    """A string-array parameter without the placeholder empty entries ROS needs to type an empty array."""
    return tuple(item for item in (value or ()) if isinstance(item, str) and item.strip())


def _tri_state(name: str, value: Any) -> str:
    text = str(value).lower()
    if text not in TRI_STATE:
        raise ValueError(f"{name} must be one of {', '.join(TRI_STATE)}, not {value!r}")
    return text


def backend_config(values: Mapping[str, Any]) -> BackendConfig:
    """The config of the backend named by `values["backend"]`.

    Raises:
        ValueError: naming the parameter to fix.
    """
    kind = values["backend"]
    constrained = _tri_state("constrained_decoding", values["constrained_decoding"])
    if kind == "mock":
        if values["mock_file"]:
            return MockConfig.from_file(values["mock_file"], observation_mode=values["mock_observation_mode"])
        return MockConfig(outputs=_strings(values["mock_outputs"]), observation_mode=values["mock_observation_mode"])
    if kind == "expert":
        return ExpertConfig(source=values["expert_source"], plan=_strings(values["expert_plan"]),
                            data_dir=values["data_dir"])
    if kind == "openai":
        return OpenAIConfig(model=values["openai_model"], base_url=values["openai_base_url"],
                            api_key_env=values["openai_api_key_env"], timeout_s=float(values["openai_timeout_s"]),
                            max_retries=int(values["openai_max_retries"]), backoff_s=float(values["openai_backoff_s"]),
                            send_images=bool(values["openai_send_images"]),
                            text_first=bool(values["openai_text_first"]))
    if kind == "hf":
        return HFConfig(model_path=values["hf_model_path"], base_model_path=values["hf_base_model_path"],
                        load_in_4bit=bool(values["hf_load_in_4bit"]), device=values["hf_device"],
                        dtype=values["hf_dtype"], constrained=constrained == "true",
                        analysis_max_tokens=int(values["analysis_max_tokens"]),
                        observation_mode=values["hf_observation_mode"],
                        trust_remote_code=bool(values["hf_trust_remote_code"]),
                        prefix_cache=bool(values["prefix_cache"]))
    if kind == "oracle":
        return oracle_config(values)
    if kind == "random":
        return RandomConfig(seed=int(values["random_seed"]), end_probability=float(values["random_end_probability"]))
    if kind in ("smollm2", "homiebot"):
        adapter = "" if kind == "smollm2" else (values["homiebot_adapter_dir"] or str(default_adapter_dir()))
        return SmolLM2Config(cache_dir=values["smollm2_cache_dir"], constrained=constrained != "false",
                             analysis_max_tokens=int(values["analysis_max_tokens"]),
                             num_threads=int(values["num_threads"]), prefix_cache=bool(values["prefix_cache"]),
                             adapter_dir=adapter)
    raise ValueError(f"backend must be one of {', '.join(BACKEND_KINDS)}, not {kind!r}")


def oracle_config(values: Mapping[str, Any]) -> OracleConfig:
    """The re-planning expert's config (the backend `oracle`, and the teacher of on-policy collection)."""
    return OracleConfig(data_dir=values["data_dir"], reach_m=float(values["oracle_reach_m"]))


def sampling_settings(values: Mapping[str, Any]) -> tuple[str, float | None, int]:
    """(parser, temperature, max_new_tokens) with "auto" resolved for `values["backend"]`.

    Raises:
        ValueError: naming the parameter to fix.
    """
    parser_default, temperature_default, tokens_default = BACKEND_DEFAULTS.get(values["backend"], LOCAL_DEFAULTS)
    parser = str(values["parser"])
    temperature_value = values["temperature"]
    temperature: float | None
    if isinstance(temperature_value, bool):
        raise ValueError(f"temperature must be 'auto', 'none' or a number, not {temperature_value!r}")
    text = str(temperature_value).strip().lower()
    if text == AUTO:
        temperature = temperature_default
    elif text == "none":
        temperature = None
    else:
        try:
            temperature = float(text)
        except ValueError:
            raise ValueError(f"temperature must be 'auto', 'none' or a number, not {temperature_value!r}") from None
    tokens_value = values["max_new_tokens"]
    if str(tokens_value).strip().lower() == AUTO:
        tokens = tokens_default
    elif isinstance(tokens_value, int) and not isinstance(tokens_value, bool):
        tokens = tokens_value
    elif isinstance(tokens_value, str) and tokens_value.strip().isdigit():
        tokens = int(tokens_value)
    else:
        raise ValueError(f"max_new_tokens must be 'auto' or a whole number, not {tokens_value!r}")
    return (parser_default if parser == AUTO else parser), temperature, tokens


def build_settings(values: Mapping[str, Any]) -> Settings:
    """Typed configs from parameter values (missing names take their defaults).

    Raises:
        ValueError: naming the parameter to fix.
    """
    unknown = sorted(set(values) - set(PARAMETER_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown planner parameter(s): {', '.join(unknown)}")
    merged = {**PARAMETER_DEFAULTS, **values}
    node = NodeConfig(
        max_steps=int(merged["max_steps"]), executor_timeout_s=float(merged["executor_timeout_s"]),
        observation_timeout_s=float(merged["observation_timeout_s"]), reset_timeout_s=float(merged["reset_timeout_s"]),
        server_wait_s=float(merged["server_wait_s"]), data_dir=merged["data_dir"], tasks_file=merged["tasks_file"],
        reset_simulator=bool(merged["reset_simulator"]), conversation_dir=merged["conversation_dir"],
        record_views=bool(merged["record_views"]),
    )
    parser, temperature, max_new_tokens = sampling_settings(merged)
    planner = PlannerConfig(
        max_samples=int(merged["max_samples"]), history_window=int(merged["history_window"]),
        request_variant=merged["request_variant"], temperature=temperature, max_new_tokens=max_new_tokens,
        require_valid=bool(merged["require_valid"]), release_image_order=bool(merged["release_image_order"]),
        hand_rules=bool(merged["hand_rules"]), object_rules=bool(merged["object_rules"]),
        no_repeat=bool(merged["no_repeat"]), object_locations=bool(merged["object_locations"]), parser=parser,
        target_names=(TARGET_NAMES_DEFAULTS.get(merged["backend"], "visible") if merged["target_names"] == AUTO
                      else str(merged["target_names"])),
    )
    dagger = (DaggerConfig(rows_dir=str(merged["dagger_rows_dir"]), beta=float(merged["dagger_beta"]),
                           seed=int(merged["dagger_seed"])) if merged["dagger_rows_dir"] else None)
    return Settings(node=node, planner=planner, backend=backend_config(merged),
                    in_context_example=_tri_state("in_context_example", merged["in_context_example"]),
                    dagger=dagger, oracle=oracle_config(merged))


def resolve_in_context_example(setting: str, backend_default: bool) -> bool:
    """"auto" follows the backend's default; "true"/"false" force it."""
    return backend_default if setting == "auto" else setting == "true"
