"""The planner node's parameters and how they become typed configs (no ROS here, so it is unit-tested directly).

`PlannerParameters` lists every ROS parameter of the node with its default; the node declares it with
emmoe_core.ros_helpers.declare_config (the names in DYNAMIC_TYPED_PARAMETERS dynamically typed). `resolve_auto` is
the one place where the parameters left at "auto" become values, per backend; `build_settings` turns the parameters
into the node config, the planner-loop config and the config of the chosen backend.
"""

from __future__ import annotations

from dataclasses import dataclass

from emmoe_core.validation import require_positive_fields

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

AUTO = "auto"
TRI_STATE = (AUTO, "true", "false")
# Parameters declared with dynamic typing: a string ("auto", "none") or a bool/number given on the command line.
DYNAMIC_TYPED_PARAMETERS = ("in_context_example", "constrained_decoding", "temperature", "max_new_tokens")


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
        require_positive_fields(self, ("executor_timeout_s", "observation_timeout_s", "reset_timeout_s", "server_wait_s"))


@dataclass(frozen=True)
class PlannerParameters:
    """Every ROS parameter of the planner node, with its default (what `--set planner.NAME=VALUE`, `-p NAME:=VALUE`
    and the `planner` section of a parameter file set). "auto" values are resolved by `resolve_auto`."""

    # Which backend plans: homiebot (the trained default), smollm2 (untuned), mock, expert, oracle, openai, hf or
    # random.
    backend: str = "homiebot"
    # The planning loop (EMMOE defaults).
    max_steps: int = NodeConfig.max_steps
    max_samples: int = PlannerConfig.max_samples
    # 0: the release sends no conversation history (3 is its defined but unused window).
    history_window: int = PlannerConfig.history_window
    request_variant: str = PlannerConfig.request_variant
    # The tri-states "auto", "true" or "false" (a bool from the command line).
    in_context_example: str | bool = AUTO
    # "auto" or a value: parser "release", "release_bracket" or "strict"; temperature "none" or a number;
    # max_new_tokens a whole number.
    parser: str = AUTO
    temperature: str | float = AUTO
    max_new_tokens: str | int = AUTO
    require_valid: bool = PlannerConfig.require_valid
    release_image_order: bool = PlannerConfig.release_image_order
    hand_rules: bool = PlannerConfig.hand_rules
    object_rules: bool = PlannerConfig.object_rules
    no_repeat: bool = PlannerConfig.no_repeat
    walk_up: bool = PlannerConfig.walk_up
    end_when_done_trying: bool = PlannerConfig.end_when_done_trying
    # Text observations: where each visible small object rests (`apple (on sofa)`).
    object_locations: bool = PlannerConfig.object_locations
    # Constrained decoding for local backends (a tri-state).
    constrained_decoding: str | bool = AUTO
    # What constrained decoding may name: auto, visible or vocabulary.
    target_names: str = AUTO
    analysis_max_tokens: int = 48
    # Local backends: reuse the prompt's constant start and walk the token trie (false: the plain generate() path).
    prefix_cache: bool = True
    # The ROS side of a run (NodeConfig).
    executor_timeout_s: float = NodeConfig.executor_timeout_s
    observation_timeout_s: float = NodeConfig.observation_timeout_s
    reset_timeout_s: float = NodeConfig.reset_timeout_s
    server_wait_s: float = NodeConfig.server_wait_s
    data_dir: str = NodeConfig.data_dir
    tasks_file: str = NodeConfig.tasks_file
    reset_simulator: bool = NodeConfig.reset_simulator
    conversation_dir: str = NodeConfig.conversation_dir
    record_views: bool = NodeConfig.record_views
    # mock (empty entries of the string arrays are dropped: a parameter file needs [""] for an empty list)
    mock_outputs: tuple[str, ...] = ()
    mock_file: str = ""
    mock_observation_mode: str = MockConfig.observation_mode
    # expert: "info" replays the successful subtasks of the task's info.txt (the annotated trajectory; the default),
    # "keypath" follows keypath.json, "replay" every info.txt block, failures included (homiebot collect), "plan".
    expert_source: str = ExpertConfig.source
    expert_plan: tuple[str, ...] = ()
    # oracle (the re-planning expert, training and evaluation only): targets farther than this are walked up to
    # (the monitor's D1 limit, far_threshold; set both together).
    oracle_reach_m: float = OracleConfig.reach_m
    # On-policy collection: with a rows folder, the backend above is the student and the oracle answers every step
    # too (its answer executed with probability dagger_beta); rows land in <dagger_rows_dir>/<episode>__<run>.jsonl.
    dagger_rows_dir: str = ""
    dagger_beta: float = DaggerConfig.beta
    dagger_seed: int = DaggerConfig.seed
    # openai
    openai_model: str = "gpt-4o"
    openai_base_url: str = OpenAIConfig.base_url
    openai_api_key_env: str = OpenAIConfig.api_key_env
    openai_timeout_s: float = OpenAIConfig.timeout_s
    openai_max_retries: int = OpenAIConfig.max_retries
    openai_backoff_s: float = OpenAIConfig.backoff_s
    openai_send_images: bool = OpenAIConfig.send_images
    openai_text_first: bool = OpenAIConfig.text_first
    # hf (device, dtype and observation mode "auto" are resolved by the hf backend against the loaded checkpoint)
    hf_model_path: str = ""
    hf_base_model_path: str = HFConfig.base_model_path
    hf_load_in_4bit: bool = HFConfig.load_in_4bit
    hf_device: str = HFConfig.device
    hf_dtype: str = AUTO
    hf_observation_mode: str = AUTO
    hf_trust_remote_code: bool = HFConfig.trust_remote_code
    # random (the random-valid-action baseline)
    random_seed: int = RandomConfig.seed
    random_end_probability: float = RandomConfig.end_probability
    # smollm2 and homiebot (HomieBot-135M: smollm2 with the trained adapter; "" = the shipped one, see resolve_auto)
    smollm2_cache_dir: str = ""
    homiebot_adapter_dir: str = ""
    num_threads: int = 0


@dataclass(frozen=True)
class AutoResolved:
    """The parameters that may be "auto", as values for one backend (see resolve_auto).

    Attributes:
        parser: how answers are parsed.
        temperature: the sampling temperature sent (None: none sent).
        max_new_tokens: the generation length limit.
        target_names: what constrained decoding may name.
        constrained: constrained decoding on (local backends).
        in_context_example: show the one-example template (None: the built backend's default).
        adapter_dir: the LoRA adapter of the smollm2 family ("" = the plain base model).
    """

    parser: str
    temperature: float | None
    max_new_tokens: int
    target_names: str
    constrained: bool
    in_context_example: bool | None
    adapter_dir: str


@dataclass(frozen=True)
class Settings:
    """Everything the node is configured with.

    Attributes:
        in_context_example: the parameter's choice (None: auto, see `uses_in_context_example`).
    """

    node: NodeConfig
    planner: PlannerConfig
    backend: BackendConfig
    in_context_example: bool | None
    dagger: DaggerConfig | None = None
    oracle: OracleConfig = OracleConfig()

    def uses_in_context_example(self, backend_default: bool) -> bool:
        """Whether runs show the in-context example: the parameter's choice, else (auto) the backend's default."""
        return backend_default if self.in_context_example is None else self.in_context_example


def resolve_auto(parameters: PlannerParameters) -> AutoResolved:
    """The values of the parameters that default to "auto", for `parameters.backend`; a value other than "auto"
    is kept (parsed and checked). "auto" follows the chosen backend as the EMMOE release does (docs/fidelity.md):

    - `parser`: "release_bracket" for openai (the release's API scripts use only the bracketed pattern), "release"
      for hf (its open-model scripts), "strict" for homiebot, smollm2, mock, expert, oracle and random, whose
      answers are well-formed by construction (constrained decoding, scripts, generated text), so every parser
      reads them the same way.
    - `temperature`: none sent for openai (the API's default, as the release's GPT-4o/Gemini scripts), 0 (greedy)
      for homiebot (HomieBot-135M, chosen on held-out train tasks: task progress 18.5 % greedy against 14.8 % at
      0.2), 0.2 otherwise (the release's HomieBot loop); "none" sends none for any backend, a number forces it.
    - `max_new_tokens`: 300 for openai (the release's `max_tokens`), 1024 otherwise (the HomieBot loop).
    - `target_names`: "vocabulary" for homiebot (trained on the expert's names, from the task vocabulary),
      "visible" (the names visible in the four views) otherwise.
    - `constrained_decoding`: on for homiebot and smollm2, off for hf (the other backends decode nothing locally).
    - `in_context_example`: None, the built backend's own default (`PlannerBackend.default_in_context_example`: on
      for the untuned local models, hf and smollm2; off for homiebot, whose adapter was trained without it, and for
      openai, mock, expert, oracle and random).
    - `homiebot_adapter_dir` "": HomieBot-135M's adapter shipped in $HOMIEBOT_ROOT/models/homiebot-135m
      (`default_adapter_dir`); smollm2 always runs the base model without an adapter.

    Raises:
        ValueError: a value that is neither "auto" nor valid, naming the parameter.
    """
    kind = parameters.backend
    parser = {"openai": "release_bracket", "hf": "release"}.get(kind, "strict")
    temperature = {"openai": None, "homiebot": 0.0}.get(kind, 0.2)
    max_new_tokens = 300 if kind == "openai" else 1024
    target_names = "vocabulary" if kind == "homiebot" else "visible"
    constrained = _tri_state("constrained_decoding", parameters.constrained_decoding)
    in_context_example = _tri_state("in_context_example", parameters.in_context_example)
    if kind == "homiebot":
        adapter_dir = parameters.homiebot_adapter_dir or str(default_adapter_dir())
    else:
        adapter_dir = ""
    return AutoResolved(
        parser=parser if parameters.parser == AUTO else parameters.parser,
        temperature=_temperature(parameters.temperature, temperature),
        max_new_tokens=_max_new_tokens(parameters.max_new_tokens, max_new_tokens),
        target_names=target_names if parameters.target_names == AUTO else parameters.target_names,
        constrained=kind in ("homiebot", "smollm2") if constrained is None else constrained,
        in_context_example=in_context_example, adapter_dir=adapter_dir)


def _tri_state(name: str, value: str | bool) -> bool | None:
    """A tri-state parameter: None for "auto", else the bool ("true"/"false", or a bool from the command line)."""
    text = str(value).lower()
    if text not in TRI_STATE:
        raise ValueError(f"{name} must be one of {', '.join(TRI_STATE)}, not {value!r}")
    return None if text == AUTO else text == "true"


def _temperature(value: str | float, auto: float | None) -> float | None:
    """The temperature parameter: `auto` for "auto", None for "none", else the number."""
    if isinstance(value, bool):
        raise ValueError(f"temperature must be 'auto', 'none' or a number, not {value!r}")
    text = str(value).strip().lower()
    if text == AUTO:
        return auto
    if text == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"temperature must be 'auto', 'none' or a number, not {value!r}") from None


def _max_new_tokens(value: str | int, auto: int) -> int:
    """The max_new_tokens parameter: `auto` for "auto", else the whole number."""
    if str(value).strip().lower() == AUTO:
        return auto
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise ValueError(f"max_new_tokens must be 'auto' or a whole number, not {value!r}")


def _strings(values: tuple[str, ...]) -> tuple[str, ...]:
    """A string-array parameter without the placeholder empty entries a parameter file needs for an empty array."""
    return tuple(item for item in values if item.strip())


def backend_config(parameters: PlannerParameters, auto: AutoResolved) -> BackendConfig:
    """The config of the backend named by `parameters.backend` ("auto" values as `auto` resolved them).

    Raises:
        ValueError: naming the parameter to fix.
    """
    kind = parameters.backend
    if kind == "mock":
        if parameters.mock_file:
            return MockConfig.from_file(parameters.mock_file, observation_mode=parameters.mock_observation_mode)
        return MockConfig(outputs=_strings(parameters.mock_outputs), observation_mode=parameters.mock_observation_mode)
    if kind == "expert":
        return ExpertConfig(source=parameters.expert_source, plan=_strings(parameters.expert_plan),
                            data_dir=parameters.data_dir)
    if kind == "openai":
        return OpenAIConfig(model=parameters.openai_model, base_url=parameters.openai_base_url,
                            api_key_env=parameters.openai_api_key_env, timeout_s=parameters.openai_timeout_s,
                            max_retries=parameters.openai_max_retries, backoff_s=parameters.openai_backoff_s,
                            send_images=parameters.openai_send_images, text_first=parameters.openai_text_first)
    if kind == "hf":
        return HFConfig(model_path=parameters.hf_model_path, base_model_path=parameters.hf_base_model_path,
                        load_in_4bit=parameters.hf_load_in_4bit, device=parameters.hf_device,
                        dtype=parameters.hf_dtype, constrained=auto.constrained,
                        analysis_max_tokens=parameters.analysis_max_tokens,
                        observation_mode=parameters.hf_observation_mode,
                        trust_remote_code=parameters.hf_trust_remote_code, prefix_cache=parameters.prefix_cache)
    if kind == "oracle":
        return oracle_config(parameters)
    if kind == "random":
        return RandomConfig(seed=parameters.random_seed, end_probability=parameters.random_end_probability)
    if kind in ("smollm2", "homiebot"):
        return SmolLM2Config(cache_dir=parameters.smollm2_cache_dir, constrained=auto.constrained,
                             analysis_max_tokens=parameters.analysis_max_tokens, num_threads=parameters.num_threads,
                             prefix_cache=parameters.prefix_cache, adapter_dir=auto.adapter_dir)
    raise ValueError(f"backend must be one of {', '.join(BACKEND_KINDS)}, not {kind!r}")


def oracle_config(parameters: PlannerParameters) -> OracleConfig:
    """The re-planning expert's config (the backend `oracle`, and the teacher of on-policy collection)."""
    return OracleConfig(data_dir=parameters.data_dir, reach_m=parameters.oracle_reach_m)


def build_settings(parameters: PlannerParameters) -> Settings:
    """Typed configs from the parameters, "auto" values resolved (resolve_auto).

    Raises:
        ValueError: naming the parameter to fix.
    """
    node = NodeConfig(
        max_steps=parameters.max_steps, executor_timeout_s=parameters.executor_timeout_s,
        observation_timeout_s=parameters.observation_timeout_s, reset_timeout_s=parameters.reset_timeout_s,
        server_wait_s=parameters.server_wait_s, data_dir=parameters.data_dir, tasks_file=parameters.tasks_file,
        reset_simulator=parameters.reset_simulator, conversation_dir=parameters.conversation_dir,
        record_views=parameters.record_views,
    )
    auto = resolve_auto(parameters)
    planner = PlannerConfig(
        max_samples=parameters.max_samples, history_window=parameters.history_window,
        request_variant=parameters.request_variant, temperature=auto.temperature,
        max_new_tokens=auto.max_new_tokens, require_valid=parameters.require_valid,
        release_image_order=parameters.release_image_order, hand_rules=parameters.hand_rules,
        object_rules=parameters.object_rules, no_repeat=parameters.no_repeat, walk_up=parameters.walk_up,
        end_when_done_trying=parameters.end_when_done_trying,
        object_locations=parameters.object_locations, parser=auto.parser, target_names=auto.target_names,
    )
    dagger = (DaggerConfig(rows_dir=parameters.dagger_rows_dir, beta=parameters.dagger_beta,
                           seed=parameters.dagger_seed) if parameters.dagger_rows_dir else None)
    return Settings(node=node, planner=planner, backend=backend_config(parameters, auto),
                    in_context_example=auto.in_context_example, dagger=dagger, oracle=oracle_config(parameters))
