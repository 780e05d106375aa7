"""Node parameters -> typed configs, and resolving a RunTask goal into an episode."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from homiebot_planner.backends import ExpertConfig, HFConfig, MockConfig, OpenAIConfig, SmolLM2Config
from homiebot_planner.episode import InvalidTaskError, free_episode_id, resolve_episode
from homiebot_planner.backends.smollm2 import default_adapter_dir
from homiebot_planner.settings import (
    DYNAMIC_TYPED_PARAMETERS,
    PlannerParameters,
    Settings,
    build_settings,
    resolve_auto,
)


def _settings(values: dict[str, object] | None = None) -> Settings:
    """The settings of a node given these parameter values (the others at their defaults)."""
    return build_settings(PlannerParameters(**(values or {})))  # type: ignore[arg-type]


def test_defaults_are_the_benchmark_settings() -> None:
    settings = _settings()
    assert isinstance(settings.backend, SmolLM2Config) and settings.backend.constrained
    assert Path(settings.backend.adapter_dir) == default_adapter_dir()  # HomieBot-135M, the trained default
    assert _settings({"backend": "smollm2"}).backend.adapter_dir == ""  # type: ignore[union-attr]
    assert (settings.node.max_steps, settings.planner.max_samples, settings.planner.history_window,
            settings.planner.temperature, settings.planner.request_variant) == (20, 5, 0, 0.0, "live")
    assert settings.in_context_example is None  # auto: the backend's default
    assert _settings({"history_window": 3}).planner.history_window == 3  # the release's unused window


@pytest.mark.parametrize(("backend", "parser", "temperature", "max_new_tokens"), [
    ({"backend": "openai", "openai_base_url": "http://127.0.0.1:9/v1"}, "release_bracket", None, 300),
    ({"backend": "hf", "hf_model_path": "/m"}, "release", 0.2, 1024),
    ({}, "strict", 0.0, 1024),  # homiebot: greedy
    ({"backend": "smollm2"}, "strict", 0.2, 1024),
    ({"backend": "mock", "mock_outputs": ("a",)}, "strict", 0.2, 1024),
])
def test_parser_and_sampling_follow_the_backend(backend: dict[str, object], parser: str, temperature: float | None,
                                                max_new_tokens: int) -> None:
    planner = _settings(backend).planner
    assert (planner.parser, planner.temperature, planner.max_new_tokens) == (parser, temperature, max_new_tokens)


def test_target_names_follow_the_backend_unless_set() -> None:
    assert _settings().planner.target_names == "vocabulary"  # homiebot, trained on the expert's names
    assert _settings({"backend": "smollm2"}).planner.target_names == "visible"
    assert _settings({"backend": "random"}).planner.target_names == "visible"
    assert _settings({"target_names": "visible"}).planner.target_names == "visible"
    with pytest.raises(ValueError, match="target_names"):
        _settings({"target_names": "all"})


def test_parser_and_sampling_are_overridable() -> None:
    openai = {"backend": "openai", "openai_base_url": "http://127.0.0.1:9/v1"}
    planner = _settings({**openai, "parser": "release", "temperature": 0.7, "max_new_tokens": 64}).planner
    assert (planner.parser, planner.temperature, planner.max_new_tokens) == ("release", 0.7, 64)
    planner = _settings({"parser": "release_bracket", "temperature": "none", "max_new_tokens": "512"}).planner
    assert (planner.parser, planner.temperature, planner.max_new_tokens) == ("release_bracket", None, 512)
    assert _settings({"temperature": "0"}).planner.temperature == 0.0


def test_each_backend_kind() -> None:
    mock = _settings({"backend": "mock", "mock_outputs": ("", "a", "b")}).backend
    assert mock == MockConfig(outputs=("a", "b"))
    expert = _settings({"backend": "expert", "expert_source": "plan", "expert_plan": ("[End]",)}).backend
    assert expert == ExpertConfig(source="plan", plan=("[End]",))
    openai = _settings({"backend": "openai", "openai_base_url": "http://127.0.0.1:9/v1"}).backend
    assert isinstance(openai, OpenAIConfig) and openai.model == "gpt-4o" and openai.max_retries == 3
    hf = _settings({"backend": "hf", "hf_model_path": "/m", "constrained_decoding": "true"}).backend
    assert isinstance(hf, HFConfig) and hf.constrained and hf.model_path == "/m"
    assert not _settings({"backend": "hf", "hf_model_path": "/m"}).backend.constrained  # type: ignore[union-attr]
    smol = _settings({"constrained_decoding": "false"}).backend
    assert isinstance(smol, SmolLM2Config) and not smol.constrained
    with pytest.raises(ValueError, match="not a LoRA adapter folder"):
        _settings({"backend": "homiebot", "homiebot_adapter_dir": str(Path(__file__).parent)})


def test_mock_script_file(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["Analysis: a\nSubtask: [End]\nModel: None"]), encoding="utf-8")
    assert _settings({"backend": "mock", "mock_file": str(script)}).backend == MockConfig(
        outputs=("Analysis: a\nSubtask: [End]\nModel: None",))
    script.write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="script.json: the mock script must be a JSON list"):
        _settings({"backend": "mock", "mock_file": str(script)})


@pytest.mark.parametrize(("values", "message"), [
    ({"backend": "llama"}, "backend must be one of"), ({"max_steps": 0}, "max_steps"),
    ({"executor_timeout_s": 0.0}, "executor_timeout_s"), ({"in_context_example": "yes"}, "in_context_example"),
    ({"backend": "mock"}, "mock_outputs"),
    ({"backend": "hf"}, "hf_model_path"), ({"temperature": -1.0}, "temperature"),
    ({"temperature": "warm"}, "temperature must be 'auto', 'none' or a number"), ({"temperature": True}, "temperature"),
    ({"max_new_tokens": 2.5}, "max_new_tokens must be 'auto'"), ({"max_new_tokens": 4}, "max_new_tokens must be >= 8"),
    ({"parser": "loose"}, "parser must be one of"),
])
def test_bad_parameters_name_what_to_fix(values: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _settings(values)


def test_an_unknown_parameter_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="hf_model_pth"):
        PlannerParameters(hf_model_pth="x")  # type: ignore[call-arg]


def test_in_context_example_setting() -> None:
    auto = _settings()
    assert auto.uses_in_context_example(True) and not auto.uses_in_context_example(False)
    assert _settings({"in_context_example": "true"}).uses_in_context_example(False)
    assert not _settings({"in_context_example": "false"}).uses_in_context_example(True)
    assert _settings({"in_context_example": True}).in_context_example is True  # a bool from the command line


def test_every_parameter_has_a_ros_parameter_type() -> None:
    for field in dataclasses.fields(PlannerParameters):
        value = field.default
        if field.name in DYNAMIC_TYPED_PARAMETERS:
            assert value == "auto", field.name
        else:
            assert isinstance(value, (bool, int, float, str)) or value == (), field.name


@pytest.mark.parametrize(("backend", "parser", "temperature", "max_new_tokens", "target_names", "constrained",
                          "adapter_dir"), [
    ("openai", "release_bracket", None, 300, "visible", False, ""),
    ("hf", "release", 0.2, 1024, "visible", False, ""),
    ("homiebot", "strict", 0.0, 1024, "vocabulary", True, str(default_adapter_dir())),
    ("smollm2", "strict", 0.2, 1024, "visible", True, ""),
    ("mock", "strict", 0.2, 1024, "visible", False, ""),
    ("expert", "strict", 0.2, 1024, "visible", False, ""),
    ("oracle", "strict", 0.2, 1024, "visible", False, ""),
    ("random", "strict", 0.2, 1024, "visible", False, ""),
])
def test_auto_resolves_to_the_documented_values(backend: str, parser: str, temperature: float | None,
                                                max_new_tokens: int, target_names: str, constrained: bool,
                                                adapter_dir: str) -> None:
    """resolve_auto's docstring, rule by rule, for every backend kind."""
    auto = resolve_auto(PlannerParameters(backend=backend))
    assert (auto.parser, auto.temperature, auto.max_new_tokens, auto.target_names, auto.constrained,
            auto.in_context_example, auto.adapter_dir) == (
        parser, temperature, max_new_tokens, target_names, constrained, None, adapter_dir)
    given = resolve_auto(PlannerParameters(backend=backend, parser="release", temperature="none", max_new_tokens=64,
                                           target_names="vocabulary", constrained_decoding="false",
                                           in_context_example="true", homiebot_adapter_dir="/adapter"))
    assert (given.parser, given.temperature, given.max_new_tokens, given.target_names, given.constrained,
            given.in_context_example) == ("release", None, 64, "vocabulary", False, True)
    assert given.adapter_dir == ("/adapter" if backend == "homiebot" else "")


def _data(root: Path, with_scene: bool) -> None:
    directory = root / "data" / "test" / "91"
    directory.mkdir(parents=True)
    (directory / "info.txt").write_text("Task: fetch the apple\n\nSubtask1: [End]\n", encoding="utf-8")
    (directory / "keypath.json").write_text('[["[End]"]]', encoding="utf-8")
    if with_scene:
        (directory / "scene.json").write_text("{}", encoding="utf-8")


def test_resolve_from_the_data_folder(tmp_path: Path) -> None:
    _data(tmp_path, with_scene=True)
    spec = resolve_episode("91", "", str(tmp_path))
    assert (spec.episode_id, spec.instruction, spec.task_id) == ("91", "fetch the apple", "91")
    assert spec.task_dir == tmp_path / "data" / "test" / "91" and spec.scene_path == spec.task_dir / "scene.json"
    assert resolve_episode("91", "another wording", str(tmp_path / "data")).instruction == "another wording"


def test_resolve_without_scene_or_from_a_task_list(tmp_path: Path) -> None:
    _data(tmp_path, with_scene=False)
    assert resolve_episode("91", "", str(tmp_path)).scene_path is None
    tasks = tmp_path / "tasks.tsv"
    tasks.write_text("id\tinstruction\n1\tfetch a frozen meat can\n", encoding="utf-8")
    spec = resolve_episode("1", "", "", str(tasks))
    assert (spec.instruction, spec.task_dir, spec.scene_path) == ("fetch a frozen meat can", None, None)


def test_free_instruction_and_errors(tmp_path: Path) -> None:
    spec = resolve_episode("", "  tidy up  ")
    assert spec.episode_id == free_episode_id("tidy up") and spec.episode_id.startswith("free-")
    with pytest.raises(InvalidTaskError, match="neither a task_id nor an instruction"):
        resolve_episode("", "")
    with pytest.raises(InvalidTaskError, match="unknown task '5'.*set data_dir or tasks_file"):
        resolve_episode("5", "")
    bad = tmp_path / "bad.tsv"
    bad.write_text("1 no tab\n", encoding="utf-8")
    with pytest.raises(InvalidTaskError, match=r"bad.tsv:1: expected 'id<TAB>instruction'"):
        resolve_episode("1", "", "", str(bad))
