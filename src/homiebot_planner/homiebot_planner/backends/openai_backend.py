"""The openai backend: any OpenAI-compatible chat-completions server (GPT-4o, Gemini's compatible endpoint, vLLM,
SGLang, Ollama, ...).

The API key is read from an environment variable only (OPENAI_API_KEY by default) and never logged or shown in
errors: wherever a server echoes it, whole or in part, every piece of it of KEY_PIECE or more characters is redacted
before the server's text is shortened. The current user turn carries the four views as base64 PNG data-URL parts before its text (after it with
`text_first`, as the release's GPT-4o and Gemini scripts send them). A request
without a temperature (the release's API setting) sends none, so the server's default applies.
"""

from __future__ import annotations

import base64
import io
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from emmoe_core.validation import require_positive

from homiebot_planner.backends.base import BackendError, ChatMessage, GenerationRequest, PlannerBackend

_LOG = logging.getLogger(__name__)
# Sent when the environment holds no key: local servers (vLLM, Ollama) accept any bearer token.
_PLACEHOLDER_KEY = "EMPTY"
# What stands in for the API key wherever a server echoed it.
REDACTED = "[redacted]"
# The shortest piece of the key that is redacted on its own (a server's partial echo, or a cut through the key).
KEY_PIECE = 8
# How much of a server's error text goes into an error message.
SERVER_TEXT_CHARS = 200


@dataclass(frozen=True)
class OpenAIConfig:
    """Settings of the openai backend.

    Attributes:
        model: the model name the server knows (e.g. "gpt-4o").
        base_url: the server's API root (e.g. "http://127.0.0.1:8000/v1").
        api_key_env: name of the environment variable holding the API key.
        timeout_s: per-request timeout in seconds.
        max_retries: retries after a connection error, timeout, rate limit or server error (not after 4xx).
        backoff_s: first retry delay; doubled after every retry.
        send_images: attach the four views (turn off for text-only servers; they then get visible-object names).
        text_first: put the text part before the image parts, as the release's API scripts do.
    """

    model: str
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = 60.0
    max_retries: int = 3
    backoff_s: float = 1.0
    send_images: bool = True
    text_first: bool = False

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ValueError("openai backend needs a model name (openai_model)")
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"openai_base_url must start with http:// or https://, got {self.base_url!r}")
        if not self.api_key_env.strip():
            raise ValueError("openai_api_key_env must name an environment variable")
        require_positive("openai_timeout_s", self.timeout_s)
        if self.max_retries < 0:
            raise ValueError(f"openai_max_retries must be >= 0, got {self.max_retries}")
        if self.backoff_s < 0:
            raise ValueError(f"openai_backoff_s must be >= 0, got {self.backoff_s}")


def image_data_url(image: np.ndarray) -> str:
    """A `data:image/png;base64,...` URL of an HxWx3 uint8 RGB image.

    Raises:
        ValueError: when the array is not HxWx3 uint8.
    """
    from PIL import Image

    if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError(f"expected an HxWx3 uint8 RGB image, got shape {image.shape} dtype {image.dtype}")
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def to_openai_messages(messages: tuple[ChatMessage, ...], send_images: bool = True,
                       text_first: bool = False) -> list[dict[str, Any]]:
    """Chat messages in the OpenAI format; a turn with images becomes image_url parts followed by a text part (the
    text part first with `text_first`)."""
    converted: list[dict[str, Any]] = []
    for message in messages:
        if message.images and send_images:
            parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": image_data_url(image)}}
                                           for image in message.images]
            text = {"type": "text", "text": message.text}
            converted.append({"role": message.role, "content": [text, *parts] if text_first else [*parts, text]})
        else:
            converted.append({"role": message.role, "content": message.text})
    return converted


class OpenAIBackend(PlannerBackend):
    """Queries an OpenAI-compatible server with retries and backoff.

    Args:
        config: server, model and retry settings.
        sleep: the delay function (tests pass a fake to skip real waiting).
    """

    def __init__(self, config: OpenAIConfig, sleep: Callable[[float], None] = time.sleep) -> None:
        import openai

        self.config = config
        self.name = f"openai:{config.model}"
        self.observation_mode = "images" if config.send_images else "text"
        self._openai = openai
        self._sleep = sleep
        api_key = os.environ.get(config.api_key_env, "")
        self._api_key = api_key
        if not api_key:
            _LOG.info("no API key in $%s; sending a placeholder (fine for local servers)", config.api_key_env)
        self._client = openai.OpenAI(base_url=config.base_url, api_key=api_key or _PLACEHOLDER_KEY,
                                     timeout=config.timeout_s, max_retries=0)

    def __repr__(self) -> str:
        return f"OpenAIBackend(model={self.config.model!r}, base_url={self.config.base_url!r})"

    def generate(self, request: GenerationRequest) -> str:
        """One chat completion. The API key never appears in what this returns or raises, even when the server
        echoes it back (the answer goes into run files and bags, the error into logs).

        Raises:
            BackendError: when the server is unreachable, times out or keeps failing after the retries, or rejects
                the request (bad key, unknown model, bad request).
        """
        try:
            answer = self._complete(request)
        except BackendError as error:
            message = self._redact(str(error))
        else:
            return self._redact(answer)
        raise BackendError(message)  # raised outside the handler: no chained exception keeps the unredacted text

    def _redact(self, text: str) -> str:
        return redact(text, self._api_key)

    def _server_text(self, error: Exception) -> str:
        """The error's text on one line, the key redacted, then shortened to SERVER_TEXT_CHARS (the cut cannot
        leave a piece of the key)."""
        return shorten(self._redact(" ".join(str(error).split())), SERVER_TEXT_CHARS)

    def _complete(self, request: GenerationRequest) -> str:
        openai = self._openai
        retryable = (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError)
        messages = to_openai_messages(request.messages, self.config.send_images, self.config.text_first)
        delay = self.config.backoff_s
        attempt = 0
        while True:
            attempt += 1
            if request.cancel is not None and request.cancel.is_set():
                raise BackendError("openai: cancelled")
            sampling: dict[str, Any] = {"max_tokens": request.max_new_tokens}
            if request.temperature is not None:
                sampling["temperature"] = request.temperature
            try:
                response = self._client.chat.completions.create(
                    model=self.config.model, messages=messages, **sampling,  # type: ignore[arg-type]
                )
            except retryable as error:
                if attempt > self.config.max_retries:
                    raise BackendError(self._describe(error, attempt)) from None
                _LOG.warning("openai: %s; retrying in %.1f s", type(error).__name__, delay)
                self._sleep(delay)
                delay *= 2
                continue
            except openai.APIStatusError as error:
                raise BackendError(f"openai: the server at {self.config.base_url} rejected the request with HTTP "
                                   f"{error.status_code} ({self._server_text(error)}); check openai_model and "
                                   f"${self.config.api_key_env}") from None
            except openai.OpenAIError as error:
                raise BackendError(f"openai: {type(error).__name__}: {self._server_text(error)}") from None
            return _content(response, self.config.base_url)

    def _describe(self, error: Exception, attempts: int) -> str:
        if isinstance(error, self._openai.APITimeoutError):
            reason = f"no answer within {self.config.timeout_s:g} s"
        elif isinstance(error, self._openai.APIConnectionError):
            reason = "cannot connect (is the server running?)"
        else:
            reason = f"{type(error).__name__}: {self._server_text(error)}"
        return f"openai: {self.config.base_url}: {reason}; gave up after {attempts} attempt(s)"

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()


def redact(text: str, secret: str) -> str:
    """`text` with the secret replaced by REDACTED, and with it every stretch covered by pieces of the secret of
    KEY_PIECE or more characters (a partial echo, or what a cut through the secret left); a secret shorter than
    KEY_PIECE is replaced only whole."""
    if not secret:
        return text
    if len(secret) < KEY_PIECE:
        return text.replace(secret, REDACTED)
    pieces = {secret[start:start + KEY_PIECE] for start in range(len(secret) - KEY_PIECE + 1)}
    spans: list[list[int]] = []  # [start, end) of the stretches to redact, overlapping and adjacent pieces merged
    for start in range(len(text) - KEY_PIECE + 1):
        if text[start:start + KEY_PIECE] in pieces:
            if spans and start <= spans[-1][1]:
                spans[-1][1] = start + KEY_PIECE
            else:
                spans.append([start, start + KEY_PIECE])
    parts: list[str] = []
    kept = 0
    for start, end in spans:
        parts += [text[kept:start], REDACTED]
        kept = end
    return "".join(parts) + text[kept:]


def shorten(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, ending in "..." when cut; the cut never splits a REDACTED."""
    if len(text) <= limit:
        return text
    cut = limit - 3
    marker = text.find(REDACTED, max(0, cut - len(REDACTED) + 1))
    if 0 <= marker < cut:
        cut = marker
    return text[:cut] + "..."


def _content(response: Any, base_url: str) -> str:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, TypeError):
        raise BackendError(f"openai: {base_url} answered without a choice/message") from None
    if content is None:
        raise BackendError(f"openai: {base_url} answered with an empty message")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)
