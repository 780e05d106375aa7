"""A reference policy server for the remote protocol, bound to 127.0.0.1, for tests and for checking a client.

It implements the protocol exactly (validates every request, decodes every image) and answers with scripted action
chunks; it is not a learned policy. Per session, navigation gets `requests_per_session` chunks of forward
base_velocity actions and then "done" with a stop; arm skills get end-effector deltas towards the front, a gripper
command (close for pick, open for put, close then open for open/close) and then "done". It records what it
received so tests can check the exchange. Run it standalone with
`python -m homiebot_executor.remote.server --port 8765`.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from emmoe_core.protocol import MODELS

from homiebot_executor.remote.protocol import (
    ACT_PATH,
    HEALTH_PATH,
    PROTOCOL,
    PolicyAction,
    PolicyRequest,
    PolicyResponse,
    ProtocolError,
)

LOOPBACK_HOSTS = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class ReferenceServerConfig:
    """Settings of the reference server.

    Attributes:
        host: interface to bind: loopback only.
        port: TCP port; 0 picks a free one.
        chunk_size: actions per chunk.
        requests_per_session: chunks before the server answers "done".
        delay_s: artificial latency per request (to test client time-outs).
        models: models it claims to serve.
    """

    host: str = "127.0.0.1"
    port: int = 0
    chunk_size: int = 4
    requests_per_session: int = 3
    delay_s: float = 0.0
    models: tuple[str, ...] = MODELS

    def __post_init__(self) -> None:
        if self.host not in LOOPBACK_HOSTS:
            raise ValueError(f"ReferenceServerConfig.host: the test server listens on loopback only "
                             f"({', '.join(LOOPBACK_HOSTS)}), got {self.host!r}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"ReferenceServerConfig.port: expected 0..65535, got {self.port}")
        if self.chunk_size < 1 or self.requests_per_session < 1:
            raise ValueError("ReferenceServerConfig: chunk_size and requests_per_session must be at least 1")
        if self.delay_s < 0:
            raise ValueError(f"ReferenceServerConfig.delay_s: expected >= 0, got {self.delay_s}")


@dataclass(frozen=True)
class ReceivedRequest:
    """What the server saw in one valid request."""

    model: str
    skill: str
    session: str
    step: int
    image_shapes: dict[str, tuple[int, ...]]
    holding: bool


def scripted_chunk(request: PolicyRequest, config: ReferenceServerConfig) -> PolicyResponse:
    """The scripted answer to a request (see the module docstring)."""
    final = request.step + 1 >= config.requests_per_session
    size = config.chunk_size
    if request.model not in config.models:
        return PolicyResponse("error", message=f"model {request.model!r} is not served here; "
                                               f"models: {', '.join(config.models)}")
    if request.skill == "navigate":
        actions = [PolicyAction("base_velocity", linear=0.2, angular=0.0, duration=0.1) for _ in range(size)]
        if final:
            actions.append(PolicyAction("stop"))
        return PolicyResponse("done" if final else "running", tuple(actions))
    actions = [PolicyAction("ee_delta", translation=(0.01, 0.0, -0.005), rotation=(0.0, 0.0, 0.0), gripper=None)
               for _ in range(size)]
    if final:
        closing = {"pick": (0.0,), "put": (1.0,), "open": (0.0, 1.0), "close": (0.0, 1.0)}[request.skill]
        actions.extend(PolicyAction("gripper", gripper=value) for value in closing)
    return PolicyResponse("done" if final else "running", tuple(actions))


class ReferencePolicyServer:
    """The reference server in a background thread: `with ReferencePolicyServer() as server: server.url`."""

    def __init__(self, config: ReferenceServerConfig | None = None) -> None:
        """Bind the socket (not yet serving)."""
        self.config = config or ReferenceServerConfig()
        self.received: list[ReceivedRequest] = []
        self.rejected: list[str] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((self.config.host, self.config.port), self._handler_class())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:40123."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ReferencePolicyServer:
        """Serve in a daemon thread."""
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="reference-policy", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until interrupted, then close the socket."""
        try:
            self._httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            self._httpd.server_close()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ReferencePolicyServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (base class signature)
                return

            def _send(self, status: int, body: dict[str, Any]) -> None:
                payload = json.dumps(body).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client gave up (time-out); nothing to answer

            def do_GET(self) -> None:  # noqa: N802 (http.server naming)
                if self.path != HEALTH_PATH:
                    self._send(404, {"error": f"unknown path {self.path}; try {HEALTH_PATH} or POST {ACT_PATH}"})
                    return
                self._send(200, {"protocol": PROTOCOL, "models": list(server.config.models)})

            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                if self.path != ACT_PATH:
                    self._send(404, {"error": f"unknown path {self.path}; POST {ACT_PATH}"})
                    return
                length = int(self.headers.get("Content-Length", "0"))
                try:
                    request = PolicyRequest.from_json(json.loads(self.rfile.read(length).decode("utf-8")))
                    shapes = {name: image.to_array().shape for name, image in request.images.items()}
                    shapes.update({f"depth:{name}": image.to_array().shape for name, image in request.depth.items()})
                except (ProtocolError, json.JSONDecodeError, UnicodeDecodeError) as error:
                    with server._lock:
                        server.rejected.append(str(error))
                    self._send(400, {"error": str(error)})
                    return
                if server.config.delay_s:
                    time.sleep(server.config.delay_s)
                with server._lock:
                    server.received.append(ReceivedRequest(request.model, request.skill, request.session,
                                                           request.step, shapes, request.state.holding))
                self._send(200, scripted_chunk(request, server.config).to_json())

        return Handler


def main(argv: list[str] | None = None) -> int:
    """Serve until interrupted."""
    parser = argparse.ArgumentParser(description="Reference server of the homiebot-policy/1 protocol (loopback).")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--chunk-size", type=int, default=4)
    parser.add_argument("--requests-per-session", type=int, default=3)
    args = parser.parse_args(argv)
    try:
        config = ReferenceServerConfig(port=args.port, chunk_size=args.chunk_size,
                                       requests_per_session=args.requests_per_session)
    except ValueError as error:
        parser.error(str(error))
    server = ReferencePolicyServer(config)
    print(f"serving {PROTOCOL} at {server.url}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
