"""HTTP client of the remote policy protocol (standard library only: urllib, json)."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from emmoe_core.validation import require_positive

from homiebot_executor.remote.protocol import (
    ACT_PATH,
    HEALTH_PATH,
    PROTOCOL,
    PolicyRequest,
    PolicyResponse,
    ProtocolError,
)


class RemotePolicyError(RuntimeError):
    """The policy server is unreachable, too slow, or answered something that is not the protocol."""


@dataclass(frozen=True)
class ClientConfig:
    """Where the policy server is and how long to wait.

    Attributes:
        url: base URL, e.g. "http://127.0.0.1:8000".
        timeout_s: seconds to wait for one answer (connect and read).
    """

    url: str
    timeout_s: float = 5.0

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"ClientConfig.url: expected http://host:port, got {self.url!r}")
        require_positive("ClientConfig.timeout_s", self.timeout_s)


class PolicyClient:
    """Sends requests to one policy server."""

    def __init__(self, config: ClientConfig) -> None:
        """Talk to `config.url`."""
        self.config = config
        self._base = config.url.rstrip("/")

    def health(self) -> list[str]:
        """The models the server offers.

        Raises:
            RemotePolicyError: unreachable, wrong protocol, malformed answer.
        """
        data = self._exchange("GET", HEALTH_PATH, None)
        if not isinstance(data, dict) or data.get("protocol") != PROTOCOL:
            raise RemotePolicyError(f"{self._base}{HEALTH_PATH}: not a {PROTOCOL} server (answered {data!r:.200})")
        models = data.get("models")
        if not isinstance(models, list) or not all(isinstance(model, str) for model in models):
            raise RemotePolicyError(f"{self._base}{HEALTH_PATH}: 'models' must be a list of strings")
        return models

    def act(self, request: PolicyRequest) -> PolicyResponse:
        """One control cycle: send the observation, receive the action chunk.

        Raises:
            RemotePolicyError: unreachable, time-out, HTTP error, or a response that breaks the protocol.
        """
        data = self._exchange("POST", ACT_PATH, request.to_json())
        try:
            return PolicyResponse.from_json(data)
        except ProtocolError as error:
            raise RemotePolicyError(f"{self._base}{ACT_PATH}: malformed response: {error}") from None

    def _exchange(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        url = f"{self._base}{path}"
        payload = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=payload, method=method,
                                         headers={"Content-Type": "application/json", "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=self.config.timeout_s) as answer:
                text = answer.read().decode("utf-8")
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace")[:300]
            raise RemotePolicyError(f"{url}: HTTP {error.code}: {detail}") from None
        except (socket.timeout, TimeoutError):
            raise RemotePolicyError(f"{url}: no answer within {self.config.timeout_s:g} s") from None
        except urllib.error.URLError as error:
            reason = error.reason
            if isinstance(reason, (socket.timeout, TimeoutError)):
                raise RemotePolicyError(f"{url}: no answer within {self.config.timeout_s:g} s") from None
            raise RemotePolicyError(f"{url}: cannot reach the policy server ({reason})") from None
        except OSError as error:
            raise RemotePolicyError(f"{url}: connection failed ({error})") from None
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise RemotePolicyError(f"{url}: answer is not JSON ({error.msg} at {error.pos})") from None
