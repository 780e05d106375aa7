"""The openai backend against a stub OpenAI-compatible server on 127.0.0.1: images, key, retries, errors."""

from __future__ import annotations

import base64
import io
import json
import logging
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from homiebot_planner.backends import BackendError, OpenAIConfig
from homiebot_planner.backends.base import ChatMessage, GenerationRequest
from homiebot_planner.backends.openai_backend import REDACTED, OpenAIBackend, redact, shorten
from homiebot_planner.planner import Observation, Planner
from homiebot_planner.prompts import system_prompt

SECRET = "sk-test-0123456789-secret"


def _views() -> dict[str, np.ndarray]:
    generator = np.random.default_rng(1)
    return {view: generator.integers(0, 255, (256, 256, 3), dtype=np.uint8)
            for view in ("front", "left", "back", "right")}


def _backend(url: str, **options: Any) -> tuple[OpenAIBackend, list[float]]:
    delays: list[float] = []
    return OpenAIBackend(OpenAIConfig(model="gpt-4o", base_url=url, **options), sleep=delays.append), delays


def test_request_carries_four_images_and_the_key(openai_stub: Any, monkeypatch: pytest.MonkeyPatch,
                                                 caplog: pytest.LogCaptureFixture) -> None:
    from PIL import Image

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    backend, _ = _backend(openai_stub.url)
    views = _views()
    decision = Planner(backend, "put the apple in the fridge").decide(Observation(images=views))
    assert decision.subtask.target == "fridge" and decision.samples == 1 and not decision.gave_up
    body = openai_stub.requests[0]
    assert body["model"] == "gpt-4o" and body["temperature"] == 0.2
    assert body["messages"][0] == {"role": "system", "content": system_prompt("images")}
    parts = body["messages"][-1]["content"]
    assert [part["type"] for part in parts] == ["image_url"] * 4 + ["text"]
    assert parts[-1]["text"].startswith("Task: put the apple in the fridge\nInventory: None\n")
    for part, view in zip(parts[:4], ("front", "left", "back", "right"), strict=True):
        prefix = "data:image/png;base64,"
        assert part["image_url"]["url"].startswith(prefix)
        image = Image.open(io.BytesIO(base64.b64decode(part["image_url"]["url"][len(prefix):])))
        assert np.array_equal(np.asarray(image.convert("RGB")), views[view])
    assert openai_stub.headers[0]["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in caplog.text and SECRET not in repr(backend)


def test_release_settings_send_no_temperature_and_300_tokens(openai_stub: Any) -> None:
    from homiebot_planner.settings import PlannerParameters, build_settings

    config = build_settings(PlannerParameters(backend="openai", openai_base_url=openai_stub.url)).planner
    backend, _ = _backend(openai_stub.url)
    Planner(backend, "put the apple in the fridge", config).decide(Observation(images=_views()))
    body = openai_stub.requests[0]
    assert "temperature" not in body and body["max_tokens"] == 300
    assert [message["role"] for message in body["messages"]] == ["system", "user"]
    assert [part["type"] for part in body["messages"][-1]["content"]] == ["image_url"] * 4 + ["text"]
    text_first, _ = _backend(openai_stub.url, text_first=True)  # the release's GPT-4o / Gemini scripts: text, then images
    Planner(text_first, "put the apple in the fridge", config).decide(Observation(images=_views()))
    assert [part["type"] for part in openai_stub.requests[1]["messages"][-1]["content"]] == ["text"] + ["image_url"] * 4


def test_retries_server_errors_with_backoff(openai_stub: Any) -> None:
    openai_stub.failures = [500, 503]
    backend, delays = _backend(openai_stub.url, max_retries=3, backoff_s=0.5)
    assert Planner(backend, "t").decide(Observation()).subtask.action == "Go to"
    assert len(openai_stub.requests) == 3 and delays == [0.5, 1.0]


def test_gives_up_after_the_retries(openai_stub: Any) -> None:
    openai_stub.failures = [500] * 5
    backend, delays = _backend(openai_stub.url, max_retries=2, backoff_s=0.1)
    with pytest.raises(BackendError, match="gave up after 3 attempt"):
        Planner(backend, "t").decide(Observation())
    assert len(openai_stub.requests) == 3 and delays == pytest.approx([0.1, 0.2])


def test_rejected_request_is_not_retried_and_hides_the_key(openai_stub: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", SECRET)
    openai_stub.failures = [401]
    backend, delays = _backend(openai_stub.url, api_key_env="MY_KEY")
    with pytest.raises(BackendError, match="HTTP 401") as error:
        Planner(backend, "t").decide(Observation())
    assert SECRET not in str(error.value) and "$MY_KEY" in str(error.value)
    assert len(openai_stub.requests) == 1 and delays == []


@pytest.mark.parametrize("failures", [[401], [500] * 5, []])
def test_a_server_echoing_the_key_never_gets_it_into_errors_or_answers(openai_stub: Any, failures: list[int],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", SECRET)
    openai_stub.echo_key, openai_stub.failures = True, list(failures)
    backend, _ = _backend(openai_stub.url, api_key_env="MY_KEY")
    request = GenerationRequest(messages=(ChatMessage("user", "next?"),), max_new_tokens=20)
    if failures:
        with pytest.raises(BackendError) as error:
            backend.generate(request)
        text = str(error.value)
    else:
        text = backend.generate(request)
    assert SECRET not in text and f"Bearer {REDACTED}" in text


def test_server_down_is_a_clear_error() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend, delays = _backend(f"http://127.0.0.1:{port}/v1", max_retries=1, backoff_s=0.0)
    with pytest.raises(BackendError, match=r"cannot connect \(is the server running\?\); gave up after 2"):
        Planner(backend, "t").decide(Observation())
    assert delays == [0.0]


def test_timeout_is_a_clear_error(openai_stub: Any) -> None:
    openai_stub.stall_s = 1.0
    backend, _ = _backend(openai_stub.url, timeout_s=0.2, max_retries=0)
    with pytest.raises(BackendError, match=r"no answer within 0\.2 s"):
        Planner(backend, "t").decide(Observation())


def test_text_only_server_gets_visible_names(openai_stub: Any) -> None:
    backend, _ = _backend(openai_stub.url, send_images=False)
    assert backend.observation_mode == "text"
    Planner(backend, "t").decide(Observation(images=_views(), visible={"front": ["013_apple"]}))
    last = openai_stub.requests[0]["messages"][-1]["content"]
    assert isinstance(last, str) and last.startswith("Visible objects:\nfront: apple\n")


@pytest.mark.parametrize(("options", "message"), [
    ({"model": " "}, "model name"), ({"base_url": "127.0.0.1:8000"}, "http://"), ({"timeout_s": 0}, "timeout"),
    ({"max_retries": -1}, "max_retries"), ({"api_key_env": ""}, "environment variable"),
])
def test_config_validation(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OpenAIConfig(**{"model": "gpt-4o", **options})


# A 19-character key, as in issue 40; the pieces a leak check looks for are its 8-character substrings.
KEY = "sk-Zq7RtY2wXp9LmN4v"
KEY_PIECES = [KEY[start:start + 8] for start in range(len(KEY) - 7)]
# Offsets at which the echoing server puts the key: every cut of a server text of 200 characters falls in the key.
OFFSETS = range(251)


class KeyEchoServer:
    """A chat-completions server on 127.0.0.1 that answers `code` with a body or answer carrying `pad` dots and then
    the request's bearer token (the key), so the key sits at any offset of the server's text.

    Attributes:
        code: the HTTP status of every answer (200 answers with an `End` subtask whose analysis carries the key).
        pad: how many characters precede the key.
        url: the API root.
    """

    def __init__(self) -> None:
        self.code = 200
        self.pad = 0
        echo = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                text = "." * echo.pad + token
                if echo.code == 200:
                    payload: dict[str, Any] = {
                        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop", "message": {
                            "role": "assistant", "content": f"Analysis: {text}\nSubtask: [End]\nModel: None"}}]}
                else:
                    payload = {"error": {"message": text, "type": "echo"}}
                data = json.dumps(payload).encode()
                self.send_response(echo.code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def key_echo(monkeypatch: pytest.MonkeyPatch) -> Iterator[KeyEchoServer]:
    """A KeyEchoServer, with KEY in $OPENAI_API_KEY."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = KeyEchoServer()
    yield server
    server.close()


def _leaks(text: str) -> list[str]:
    return [piece for piece in KEY_PIECES if piece in text]


@pytest.mark.parametrize("code", [401, 500, 200])
def test_no_piece_of_the_key_leaves_the_backend_at_any_offset(key_echo: KeyEchoServer, code: int,
                                                              caplog: pytest.LogCaptureFixture,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    caplog.set_level(logging.DEBUG)
    key_echo.code = code
    backend, _ = _backend(key_echo.url, max_retries=1, backoff_s=0.0)
    request = GenerationRequest(messages=(ChatMessage("user", "next?"),), max_new_tokens=20)
    texts: list[str] = []
    for pad in OFFSETS:
        key_echo.pad = pad
        if code == 200:
            texts.append(backend.generate(request))
        else:
            with pytest.raises(BackendError) as error:
                backend.generate(request)
            texts.append(str(error.value))
            assert error.value.__cause__ is None and error.value.__context__ is None
    backend.close()
    assert all(REDACTED in text for text in (texts if code == 200 else texts[:100]))  # the key was echoed
    captured = capsys.readouterr()
    for text in (*texts, caplog.text, captured.out, captured.err):
        assert not _leaks(text)


@pytest.mark.parametrize("code", [401, 500, 200])
def test_no_piece_of_the_key_reaches_the_run_records(key_echo: KeyEchoServer, code: int, tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Through the planner and the episode loop: the run's end, every record and conversation.json."""
    from homiebot_planner.memory import write_conversation_json
    from homiebot_planner.planner import PlannerConfig
    from homiebot_planner.rollout import EpisodeStep, Execution, Observed, run_episode

    class Recorder:
        def __init__(self) -> None:
            self.steps: list[EpisodeStep] = []

        def record(self, step: EpisodeStep) -> None:
            self.steps.append(step)

    class Stack:
        def observe(self) -> Observed:
            return Observed(Observation())

        def execute(self, decision: Any, inventory: Any) -> Execution:
            return Execution(success=True, inventory=tuple(inventory))

    caplog.set_level(logging.DEBUG)
    key_echo.code = code
    backend, _ = _backend(key_echo.url, max_retries=0, send_images=False)
    for pad in range(150, 251):  # the cuts of the 200-character server text
        key_echo.pad = pad
        planner = Planner(backend, "put the apple in the fridge", PlannerConfig(max_samples=1))
        recorder = Recorder()
        result = run_episode(planner, Stack(), Stack(), recorder, 3)
        run_dir = tmp_path / str(pad)
        write_conversation_json(run_dir / "conversation.json", planner.memory.rounds)
        (run_dir / "records.txt").write_text(f"{result!r}\n" + "\n".join(repr(step) for step in recorder.steps))
    backend.close()
    captured = capsys.readouterr()
    written = [path.read_text() for path in tmp_path.rglob("*") if path.is_file()]
    assert REDACTED in written[0] or code != 200
    for text in (*written, caplog.text, captured.out, captured.err):
        assert not _leaks(text)


def test_redact_covers_every_piece_of_the_key_and_shorten_keeps_markers_whole() -> None:
    assert redact(f"a {KEY} b {KEY[:8]} c {KEY[-9:]}{KEY}", KEY) == f"a {REDACTED} b {REDACTED} c {REDACTED}"
    assert redact(f"{KEY[:7]} {KEY[3:]}", KEY) == f"{KEY[:7]} {REDACTED}"  # 7 characters are no piece
    assert redact("short key: abc", "abc") == f"short key: {REDACTED}" and redact("text", "") == "text"
    text = "x" * 190 + REDACTED + "y" * 20
    assert shorten(text, 200) == "x" * 190 + "..." and shorten(text, 210) == "x" * 190 + REDACTED + "y" * 7 + "..."
    assert shorten("short", 200) == "short"
