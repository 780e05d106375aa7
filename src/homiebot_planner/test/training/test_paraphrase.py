"""`homiebot data paraphrase` against a stub OpenAI-compatible server on 127.0.0.1 (random port)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from homiebot.cli import main as homiebot_main
from homiebot_planner.training.build import BuildConfig, build_datasets
from homiebot_planner.training.paraphrase import (ParaphraseConfig, ParaphraseError, Paraphraser, keeps_names,
                                                  paraphrase_split, parse_rewrites, protected_names)
from homiebot_planner.training.trajectory import TrajectoryError, read_trajectory

TEXTS = 1 + 7 + 1 + 5 + 1 + 3  # per task: the instruction + the analyses of its successful steps (7, 5, 3)


class StubServer:
    """Answers chat completions with numbered rewrites; the first answer for each task instruction drops the names."""

    def __init__(self) -> None:
        self.requests: list[dict[str, object]] = []
        self.keys: set[str] = set()
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.keys.add(self.headers.get("Authorization", ""))
                content = stub.answer(body)
                payload = json.dumps({"id": "stub", "object": "chat.completion", "created": 0, "model": body["model"],
                                      "choices": [{"index": 0, "finish_reason": "stop",
                                                   "message": {"role": "assistant", "content": content}}],
                                      "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload.encode())

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def answer(self, body: dict[str, object]) -> str:
        messages = body["messages"]
        assert isinstance(messages, list)
        user = messages[-1]["content"]
        kind = user.split("\n")[0].removeprefix("Kind of text: ")
        names_line = user.split("\n")[1].removeprefix("Object names to keep verbatim: ")
        names = [] if names_line == "none" else names_line.split(", ")
        text = user.split("\nText: ", 1)[1]
        count = int(messages[0]["content"].split("Write ")[1].split(" ")[0])
        with self._lock:
            self.requests.append(body)
            round_ = self._seen.get(text, 0)
            self._seen[text] = round_ + 1
        rewrites = [f"Version {round_ * count + index + 1}: {text}" for index in range(count)]
        if kind == "task instruction" and round_ == 0:
            dropped = text
            for name in names:
                dropped = dropped.replace(name, "something")
            rewrites[-1] = f"Lossy: {dropped}"
        return json.dumps(rewrites)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub() -> Iterator[StubServer]:
    server = StubServer()
    yield server
    server.close()


def _config(stub: StubServer, cache: Path, **overrides: object) -> ParaphraseConfig:
    settings: dict[str, object] = {"base_url": stub.url, "model": "stub-4o", "rewrites": 2, "cache_dir": cache,
                                   "api_key_env": "HOMIEBOT_TEST_KEY", "workers": 2}
    settings.update(overrides)
    return ParaphraseConfig(**settings)  # type: ignore[arg-type]


def test_rewrites_keep_object_names_and_a_rerun_makes_no_request(
        emmoe_data: Path, tmp_path: Path, stub: StubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOMIEBOT_TEST_KEY", "secret-key")
    out = tmp_path / "paraphrases.json"

    report = paraphrase_split(emmoe_data, "train", out, _config(stub, tmp_path / "cache"))

    # One request per text, plus a second one for each of the 3 task instructions whose first answer lost the names.
    assert len(stub.requests) == TEXTS + 3 == report.requests
    assert (report.texts, report.rejected, report.short, report.cached) == (TEXTS, 3, 0, 0)
    assert stub.keys == {"Bearer secret-key"}
    data = json.loads(out.read_text())
    task_1 = data["tasks"]["1"]
    assert [variant["task"] for variant in task_1] == [
        "Version 1: Put the apple from the kitchen_counter into the fridge",
        "Version 3: Put the apple from the kitchen_counter into the fridge"]
    assert sorted(task_1[0]["analyses"]) == ["1", "2", "4", "5", "6", "7", "8"]  # successful steps only
    assert task_1[1]["analyses"]["7"] == "Version 2: I put the apple into the fridge."

    first_output = out.read_text()
    rerun = paraphrase_split(emmoe_data, "train", out, _config(stub, tmp_path / "cache"))

    assert len(stub.requests) == TEXTS + 3  # nothing new reached the server
    assert (rerun.requests, rerun.cached) == (0, TEXTS + 3)
    assert out.read_text() == first_output


def test_build_adds_one_variant_per_rewrite(emmoe_data: Path, tmp_path: Path, stub: StubServer) -> None:
    paraphrases = tmp_path / "paraphrases.json"
    paraphrase_split(emmoe_data, "train", paraphrases, _config(stub, tmp_path / "cache"))

    counts = build_datasets(BuildConfig(data_dir=emmoe_data, out_dir=tmp_path / "out", paraphrases=paraphrases,
                                        hf_datasets=False))

    # Original + 2 rewrites: 3 x 15 SFT samples and 3 x 38 DPO rows.
    assert (counts.variants, counts.sft, counts.dpo_total) == (3, 45, 114)
    sft = {sample["id"]: sample for sample in json.loads((tmp_path / "out" / "sft_train.json").read_text())}
    rewritten = sft["1_r2_7"]["conversations"]
    assert "\nTask: Version 3: Put the apple from the kitchen_counter into the fridge\n" in rewritten[0]["value"]
    assert rewritten[1]["value"] == ("Analysis: Version 2: I put the apple into the fridge.\n"
                                     "Subtask: [Put, apple, fridge]\nModel: RT-1-X")
    assert sft["1_r2_7"]["image"] == sft["1_7"]["image"]


def test_a_paraphrase_file_for_other_data_is_refused(emmoe_data: Path, tmp_path: Path) -> None:
    paraphrases = tmp_path / "paraphrases.json"
    paraphrases.write_text(json.dumps({"format": "homiebot-paraphrases/1", "tasks": {"1": [], "2": []}}))

    with pytest.raises(TrajectoryError, match=r"paraphrases.json: task 3: no rewrites"):
        build_datasets(BuildConfig(data_dir=emmoe_data, out_dir=tmp_path / "out", paraphrases=paraphrases))


def test_cli_paraphrase_against_the_stub(emmoe_data: Path, tmp_path: Path, stub: StubServer,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    arguments = ["data", "paraphrase", "--data", str(emmoe_data), "--out", str(tmp_path / "p.json"),
                 "--base-url", stub.url, "--model", "stub-4o", "--rewrites", "1"]

    assert homiebot_main(arguments) == 0
    assert homiebot_main(arguments) == 0

    output = capsys.readouterr().out
    # With one rewrite per text, each task instruction's lossy first answer costs a second request (+3).
    assert f"texts: {TEXTS}, requests: {TEXTS + 3}, cached responses: 0" in output
    assert f"texts: {TEXTS}, requests: 0, cached responses: {TEXTS + 3}" in output
    assert (tmp_path / "paraphrase_cache").is_dir()


def test_an_unreachable_server_is_one_clear_error(emmoe_data: Path, tmp_path: Path) -> None:
    stub = StubServer()
    url = stub.url
    stub.close()  # nothing listens on that port any more

    with pytest.raises(ParaphraseError, match=r"request to http://127\.0\.0\.1:\d+/v1 \(model stub-4o\) failed"):
        paraphrase_split(emmoe_data, "train", tmp_path / "p.json",
                         ParaphraseConfig(base_url=url, model="stub-4o", cache_dir=tmp_path / "c", timeout_s=5,
                                          retries=0))


class FixedAnswerClient:
    """Stands in for openai.OpenAI: every chat completion answers `content`."""

    def __init__(self, content: str) -> None:
        self.calls = 0
        self.chat = self
        self.completions = self
        self._content = content

    def create(self, **_: object) -> object:
        self.calls += 1
        message = type("Message", (), {"content": self._content})()
        return type("Response", (), {"choices": [type("Choice", (), {"message": message})()]})()


def test_rewrites_that_lose_a_name_span_lines_or_repeat_are_rejected(tmp_path: Path) -> None:
    client = FixedAnswerClient(json.dumps(["Carry the green_can\nto the sofa", "Take the green_can to the sofa",
                                           "take the green_can to the SOFA", "Take the can to the sofa",
                                           "Bring the green_can to the sofa"]))
    paraphraser = Paraphraser(ParaphraseConfig(base_url="http://127.0.0.1:9/v1", model="fixed", rewrites=3,
                                               cache_dir=tmp_path, max_attempts=2), client)

    accepted = paraphraser.rewrite("Bring the green_can to the sofa", ["green_can", "sofa"], "task instruction")

    # Per answer: two lines, a case-insensitive repeat, a lost name and the unchanged original are rejected.
    assert accepted == ["Take the green_can to the sofa"]
    assert client.calls == 2  # the second attempt (same answer) adds nothing new
    assert (paraphraser.report.rejected, paraphraser.report.short) == (4 + 5, 1)


def test_names_to_keep_and_response_parsing(emmoe_data: Path) -> None:
    trajectory = read_trajectory(emmoe_data / "train" / "2" / "info.txt")

    assert protected_names(trajectory, "Bring the green_can to the sofa") == ["green_can", "sofa"]
    assert protected_names(trajectory, "Use the blue_cup, not the sofa") == ["sofa", "blue_cup"]
    assert protected_names(trajectory, "I can see it") == []  # "can" is only the target of a failed step
    assert keeps_names("Take the Green_Can over to the SOFA", ["green_can", "sofa"])
    assert not keeps_names("Take the green can to the sofa", ["green_can", "sofa"])
    assert not keeps_names("Move the green_can to the sofas", ["green_can", "sofa"])
    assert parse_rewrites('```json\n["one", "two"]\n```') == ["one", "two"]
    assert parse_rewrites("1. first rewrite\n2) second rewrite\n- third") == ["first rewrite", "second rewrite",
                                                                              "third"]
