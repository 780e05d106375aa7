"""The mock backend: scripted outputs for tests and demonstrations."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from homiebot_planner.backends.base import BackendError, EpisodeInfo, GenerationRequest, PlannerBackend


@dataclass(frozen=True)
class MockConfig:
    """Settings of the mock backend.

    Attributes:
        outputs: the raw outputs to return, one per call, in order.
        repeat_last: keep returning the last output once the script is used up (otherwise raise BackendError).
        observation_mode: what the mock claims to see ("images" or "text").
    """

    outputs: tuple[str, ...]
    repeat_last: bool = True
    observation_mode: str = "images"

    def __post_init__(self) -> None:
        if not self.outputs:
            raise ValueError("mock backend needs at least one scripted output (mock_outputs)")
        if self.observation_mode not in ("images", "text"):
            raise ValueError(f"mock observation_mode must be 'images' or 'text', not {self.observation_mode!r}")

    @classmethod
    def from_file(cls, path: Path | str, **options: object) -> MockConfig:
        """Read the script from a JSON file holding a list of strings.

        Raises:
            ValueError: naming the file when it cannot be read or is not a list of strings.
        """
        path = Path(path)
        try:
            outputs = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: cannot read the mock script: {error}") from error
        if not isinstance(outputs, list) or not all(isinstance(item, str) for item in outputs):
            raise ValueError(f"{path}: the mock script must be a JSON list of strings")
        return cls(outputs=tuple(outputs), **options)  # type: ignore[arg-type]


class MockBackend(PlannerBackend):
    """Returns scripted outputs in order and keeps every request it received (for prompt assertions)."""

    def __init__(self, config: MockConfig | Sequence[str]) -> None:
        self.config = config if isinstance(config, MockConfig) else MockConfig(outputs=tuple(config))
        self.name = "mock"
        self.observation_mode = self.config.observation_mode  # type: ignore[assignment]
        self.requests: list[GenerationRequest] = []
        self._next = 0

    def start_episode(self, episode: EpisodeInfo) -> None:
        """Restart the script for every episode."""
        self._next = 0

    def generate(self, request: GenerationRequest) -> str:
        """The next scripted output."""
        self.requests.append(request)
        if self._next >= len(self.config.outputs):
            if not self.config.repeat_last:
                raise BackendError(f"mock script exhausted after {len(self.config.outputs)} outputs")
            return self.config.outputs[-1]
        output = self.config.outputs[self._next]
        self._next += 1
        return output
