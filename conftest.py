"""Test infrastructure shared by every test in the repository (tests/ and src/*/test/).

ROS 2 isolation rules enforced here:
- every node stays on loopback: the project's default (ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT with the
  loopback Fast DDS profile, src/homiebot/config/fastdds_loopback.xml) is set for the test session where the
  environment names no range and no profile, and no node starts unless emmoe_core.dds_guard accepts the environment
  (that, or LOCALHOST): Fast DDS would otherwise multicast discovery on every network interface;
- every test that uses ROS gets its own random ROS_DOMAIN_ID, so test runs on one machine never meet.

Fixtures:
- `ros_domain_id`: a random domain id, exported to os.environ for the test (subprocesses inherit it).
- `ros_context`: an initialised rclpy Context on that domain, shut down after the test.
- `ros_node_factory`: creates nodes in `ros_context` and destroys them afterwards.
- `ros_process`: starts a Python module or script as a separate process in the test's domain, waits for a
  readiness line on its output, and terminates it afterwards (its output is shown when the test fails).
- `openai_stub`: a stub OpenAI-compatible chat-completions server on 127.0.0.1 (random port).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent
LOOPBACK_PROFILE = REPO_ROOT / "src" / "homiebot" / "config" / "fastdds_loopback.xml"


def loopback_dds_environment() -> dict[str, str]:
    """The project's default DDS environment (what env.sh exports): SYSTEM_DEFAULT with the loopback profile."""
    return {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT", "FASTDDS_DEFAULT_PROFILES_FILE": str(LOOPBACK_PROFILE)}


def _default_to_loopback_dds() -> None:
    """Give the session the project's default DDS environment where it names neither a range nor a profile (a
    range someone chose is kept, and checked by the guard)."""
    if not os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") and not os.environ.get("FASTDDS_DEFAULT_PROFILES_FILE"):
        os.environ.update(loopback_dds_environment())


def require_localhost_discovery() -> None:
    """Fail the calling test unless DDS traffic stays on this machine (emmoe_core.dds_guard)."""
    try:
        from emmoe_core.dds_guard import discovery_problem
    except ImportError as error:
        pytest.fail(f"refusing to start ROS 2 nodes: the DDS guard does not import ({error}); source env.sh",
                    pytrace=False)
    problem = discovery_problem()
    if problem is not None:
        pytest.fail(f"{problem}. Run the tests through `make test` or after `source env.sh`.", pytrace=False)


def _guard_rclpy_init() -> None:
    """Make every rclpy.init in the test process check the discovery range first."""
    try:
        import rclpy
    except ImportError:
        return
    original_init = rclpy.init
    if getattr(original_init, "_homiebot_guarded", False):
        return

    def guarded_init(*args: Any, **kwargs: Any) -> Any:
        require_localhost_discovery()
        return original_init(*args, **kwargs)

    guarded_init._homiebot_guarded = True  # type: ignore[attr-defined]
    rclpy.init = guarded_init


def pytest_configure(config: pytest.Config) -> None:
    """Register markers and guard rclpy.init."""
    config.addinivalue_line("markers", "ros: starts ROS 2 nodes (needs env.sh: DDS on loopback)")
    config.addinivalue_line("markers", "slow: longer than a few seconds; excluded by default (make test-slow)")
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped without one")
    _default_to_loopback_dds()
    _guard_rclpy_init()


@pytest.fixture
def ros_domain_id(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """A random ROS_DOMAIN_ID for this test, held for the test so that no other test or stack on this machine uses
    it at the same time, and exported so that child processes join the same domain."""
    from emmoe_core.ros_domains import lease_domain

    require_localhost_discovery()
    with lease_domain() as lease:
        monkeypatch.setenv("ROS_DOMAIN_ID", str(lease.domain_id))
        yield lease.domain_id


@pytest.fixture
def ros_context(ros_domain_id: int) -> Iterator[Any]:
    """An rclpy Context initialised on the test's own domain; shut down after the test."""
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context, domain_id=ros_domain_id)
    try:
        yield context
    finally:
        if context.ok():
            rclpy.shutdown(context=context)


@pytest.fixture
def ros_node_factory(ros_context: Any) -> Iterator[Callable[..., Any]]:
    """Create nodes in the test's context: `node = ros_node_factory("name")`; all destroyed after the test."""
    from rclpy.node import Node

    nodes: list[Any] = []

    def make(name: str, **kwargs: Any) -> Any:
        node = Node(name, context=ros_context, **kwargs)
        nodes.append(node)
        return node

    yield make
    for node in nodes:
        node.destroy_node()


class RosProcess:
    """A child Python process in the test's ROS domain, with its combined output captured."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = argv
        self.lines: list[str] = []
        self._ready = threading.Event()
        self._ready_text = ""
        from homiebot.supervisor import die_with_parent

        self.process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ),
            cwd=REPO_ROOT, start_new_session=True, preexec_fn=die_with_parent,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            if self._ready_text and self._ready_text in line:
                self._ready.set()

    def wait_for(self, text: str, timeout: float = 30.0) -> None:
        """Block until a line containing `text` is printed; fail with the output if the process dies first."""
        self._ready_text = text
        if any(text in line for line in self.lines):
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._ready.wait(0.1):
                return
            if self.process.poll() is not None:
                self._reader.join(timeout=2)
                if any(text in line for line in self.lines):
                    return
                pytest.fail(f"{self.argv} exited with {self.process.returncode} before printing {text!r}:\n"
                            + self.output(), pytrace=False)
        pytest.fail(f"{self.argv} did not print {text!r} within {timeout} s:\n" + self.output(), pytrace=False)

    def output(self) -> str:
        """Everything the process printed so far."""
        return "\n".join(self.lines)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGINT, then SIGKILL after `timeout`; returns the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(subprocess.signal.SIGINT)  # type: ignore[attr-defined]
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=2)
        return self.process.returncode


@pytest.fixture
def ros_process(ros_domain_id: int, request: pytest.FixtureRequest) -> Iterator[Callable[..., RosProcess]]:
    """Start child processes in the test's domain: `ros_process("-m", "pkg.module", ready="text")`.

    Arguments are passed to the current Python interpreter. The processes are stopped after the test;
    when the test failed, their output is printed.
    """
    processes: list[RosProcess] = []

    def start(*args: str, ready: str | None = None, timeout: float = 30.0) -> RosProcess:
        process = RosProcess([sys.executable, *args])
        processes.append(process)
        if ready is not None:
            process.wait_for(ready, timeout)
        return process

    yield start
    for process in processes:
        process.stop()
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        for process in processes:
            print(f"--- output of {process.argv}:\n{process.output()}")


# What the stub server answers when nothing else is scripted.
STUB_ANSWER = "Analysis: the fridge is ahead.\nSubtask: [Go to, fridge]\nModel: NoMaD"


class OpenAIStub:
    """A minimal chat-completions server on 127.0.0.1: records requests, can fail or stall first.

    Attributes:
        requests, headers: every request body and its headers (lower-cased names), in order.
        failures: HTTP codes to answer with, one per request, before succeeding.
        stall_s: seconds to wait before answering each request.
        answers: contents to answer with, in order; then `default_answer`.
        echo_key: when true, every error body and answer repeats the request's Authorization header (a hostile or
            careless server).
        url: the API root (`http://127.0.0.1:<port>/v1`).
    """

    def __init__(self, default_answer: str = STUB_ANSWER) -> None:
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.failures: list[int] = []
        self.stall_s = 0.0
        self.answers: list[str] = []
        self.default_answer = default_answer
        self.echo_key = False
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                stub.headers.append({key.lower(): value for key, value in self.headers.items()})
                if stub.stall_s:
                    time.sleep(stub.stall_s)
                if self.path != "/v1/chat/completions":
                    return self._reply(404, {"error": {"message": f"no route {self.path}"}})
                echo = f" (you sent {self.headers.get('Authorization')})" if stub.echo_key else ""
                if stub.failures:
                    code = stub.failures.pop(0)
                    return self._reply(code, {"error": {"message": f"stub failure {code}{echo}", "type": "stub"}})
                content = (stub.answers.pop(0) if stub.answers else stub.default_answer) + echo
                self._reply(200, {
                    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": content}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                })

            def _reply(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(code)
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
def openai_stub() -> Iterator[OpenAIStub]:
    """A stub OpenAI-compatible server on 127.0.0.1 (random port); `openai_stub.url` is its API root."""
    server = OpenAIStub()
    yield server
    server.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[Any]:
    """Keep each phase's report on the test item so fixtures can tell whether the test failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
