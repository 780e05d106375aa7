"""`homiebot data paraphrase`: the paper's text augmentation through any OpenAI-compatible server.

Every task instruction and every analysis of a successful step (the only analyses that reach training text) is
rewritten N times by a chat model; each rewrite must keep the object names of the original verbatim, or it is
rejected and more are asked for (so is a rewrite spanning several lines: task and analysis are one line each in the
training text). Names to keep: the targets and places of the trajectory's successful subtasks
that occur in the text (failed ones may name things that do not exist), and every snake_case word of the text
(EMMOE writes objects as `green_can`, `brown_table`).

Responses are cached on disk, one file per request keyed by the SHA-256 of everything that determines it (prompt
version, model, temperature, N, text, names, attempt number), so a rerun costs no request at all.

The output file (`format: homiebot-paraphrases/1`) maps each task id to N variants
`{"task": <rewrite>, "analyses": {"<step>": <rewrite>}}`; a text with fewer than N accepted rewrites keeps its
original wording in the missing variants (the report counts them). `homiebot data build --paraphrases FILE`
turns each variant into a rewritten copy of the trajectory.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from emmoe_core.validation import require_positive

from homiebot_planner.training.trajectory import Trajectory, TrajectoryError, find_trajectories, read_trajectory

FILE_FORMAT = "homiebot-paraphrases/1"
PROMPT_VERSION = 1
_SNAKE_CASE = re.compile(r"(?<![\w])[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+(?![\w])")
_LIST_MARKER = re.compile(r"^\s*(?:\d+[.):]|[-*•])\s*")
_SYSTEM_PROMPT = (
    "You paraphrase texts for the training data of a household robot. Write {n} different rewrites of the text the "
    "user gives you, each with the same meaning and the same facts, in natural varied English. Copy every object "
    "name the user lists exactly as written, underscores included. Reply with a JSON array of {n} strings and "
    "nothing else."
)


class ParaphraseError(RuntimeError):
    """The server could not be reached or answered with an error; the message says which request."""


class ChatClient(Protocol):
    """The part of `openai.OpenAI` this module uses (a stand-in can be passed in tests)."""

    @property
    def chat(self) -> Any:  # `client.chat.completions.create(...)`
        ...


@dataclass(frozen=True)
class ParaphraseConfig:
    """How to reach the rewriting model and what to ask of it.

    Attributes:
        base_url: the OpenAI-compatible endpoint, e.g. `http://127.0.0.1:8000/v1` or `https://api.openai.com/v1`.
        model: the model name the server knows (the paper used GPT-4o).
        rewrites: rewrites per text (the paper: 3, giving 4x data).
        cache_dir: where responses are cached.
        api_key_env: the environment variable holding the API key (local servers usually need none).
        temperature: sampling temperature of the rewriting model.
        max_attempts: requests per text before settling for fewer rewrites.
        workers: requests in flight at once.
        timeout_s: time limit of one request.
        retries: times the client retries a failed request (with back-off) before giving up.
    """

    base_url: str
    model: str
    cache_dir: Path
    rewrites: int = 3
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.9
    max_attempts: int = 3
    workers: int = 4
    timeout_s: float = 120.0
    retries: int = 2

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError("--base-url must be an http(s) URL such as http://127.0.0.1:8000/v1, "
                             f"not {self.base_url!r}")
        if not self.model:
            raise ValueError("--model must name the server's model")
        for name in ("rewrites", "max_attempts", "workers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature must be in [0, 2], not {self.temperature}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, not {self.retries}")
        require_positive("timeout_s", self.timeout_s)


@dataclass
class ParaphraseReport:
    """What a paraphrase run did.

    Attributes:
        texts: distinct texts rewritten.
        requests: requests sent to the server (0 on a fully cached rerun).
        cached: responses read from the cache.
        rejected: rewrites thrown away (an object name missing, several lines, unchanged, or a repeat).
        short: texts that got fewer accepted rewrites than asked for (their missing variants keep the original).
    """

    texts: int = 0
    requests: int = 0
    cached: int = 0
    rejected: int = 0
    short: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **amounts: int) -> None:
        """Add to the counters (thread-safe)."""
        with self._lock:
            for name, amount in amounts.items():
                setattr(self, name, getattr(self, name) + amount)

    def summary_lines(self) -> list[str]:
        """A short human-readable report."""
        return [f"texts: {self.texts}, requests: {self.requests}, cached responses: {self.cached}",
                f"rejected rewrites: {self.rejected}, texts short of rewrites: {self.short}"]


def protected_names(trajectory: Trajectory, text: str) -> list[str]:
    """The names a rewrite of `text` must keep: successful subtasks' targets/places in it, and its snake_case words."""
    candidates = {name for step in trajectory.steps if step.succeeded for name in (step.target, step.place) if name}
    found = [name for name in sorted(candidates) if _contains(text, name)]
    for word in _SNAKE_CASE.findall(text):
        if not any(word.lower() == name.lower() for name in found):
            found.append(word)
    return found


def _contains(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", text, re.IGNORECASE) is not None


def keeps_names(rewrite: str, names: list[str]) -> bool:
    """Whether every name occurs in the rewrite (case-insensitive, as a whole word, underscores as written)."""
    return all(_contains(rewrite, name) for name in names)


def parse_rewrites(content: str) -> list[str]:
    """The rewrites in a response: a JSON array of strings, or else one rewrite per (optionally numbered) line."""
    text = content.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("\n") + 1:] if "\n" in text else ""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, list) and all(isinstance(item, str) for item in data):
        return [item.strip() for item in data if item.strip()]
    lines = (_LIST_MARKER.sub("", line).strip().strip('"') for line in text.splitlines())
    return [line for line in lines if line and line not in ("[", "]")]


class Paraphraser:
    """Asks the server for rewrites of one text at a time, through the on-disk cache."""

    def __init__(self, config: ParaphraseConfig, client: ChatClient | None = None) -> None:
        """Create the paraphraser; without `client`, an `openai.OpenAI` client for `config.base_url`."""
        self.config = config
        self.report = ParaphraseReport()
        if client is None:
            import openai

            client = openai.OpenAI(base_url=config.base_url, api_key=os.environ.get(config.api_key_env) or "unused",
                                   timeout=config.timeout_s, max_retries=config.retries)
        self._client: ChatClient = client

    def rewrite(self, text: str, names: list[str], kind: str) -> list[str]:
        """Up to `config.rewrites` accepted rewrites of `text` (fewer only after `max_attempts` requests).

        Raises:
            ParaphraseError: when a request fails.
        """
        accepted: list[str] = []
        for attempt in range(self.config.max_attempts):
            for candidate in parse_rewrites(self._response(text, names, kind, attempt)):
                usable = (keeps_names(candidate, names) and candidate != text and "\n" not in candidate
                          and candidate.lower() not in (seen.lower() for seen in accepted))
                if not usable:
                    self.report.add(rejected=1)
                elif len(accepted) < self.config.rewrites:
                    accepted.append(candidate)
            if len(accepted) >= self.config.rewrites:
                break
        self.report.add(texts=1, short=int(len(accepted) < self.config.rewrites))
        return accepted

    def _response(self, text: str, names: list[str], kind: str, attempt: int) -> str:
        key = hashlib.sha256(json.dumps({
            "prompt_version": PROMPT_VERSION, "model": self.config.model, "temperature": self.config.temperature,
            "rewrites": self.config.rewrites, "kind": kind, "text": text, "names": names, "attempt": attempt,
        }, sort_keys=True).encode("utf-8")).hexdigest()
        path = Path(self.config.cache_dir) / key[:2] / f"{key}.json"
        if path.is_file():
            self.report.add(cached=1)
            return str(json.loads(path.read_text(encoding="utf-8"))["response"])
        content = self._request(text, names, kind)
        self.report.add(requests=1)
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8") as handle:
            json.dump({"model": self.config.model, "kind": kind, "text": text, "attempt": attempt,
                       "response": content}, handle, ensure_ascii=False)
        os.replace(handle.name, path)
        return content

    def _request(self, text: str, names: list[str], kind: str) -> str:
        rewrites = self.config.rewrites
        messages = [
            {"role": "system", "content": _SYSTEM_PROMPT.format(n=rewrites)},
            {"role": "user", "content": f"Kind of text: {kind}\nObject names to keep verbatim: "
                                        f"{', '.join(names) if names else 'none'}\nText: {text}"},
        ]
        try:
            response = self._client.chat.completions.create(model=self.config.model, messages=messages,
                                                            temperature=self.config.temperature)
        except Exception as error:  # the openai client raises many types (connection, status, timeout)
            raise ParaphraseError(f"request to {self.config.base_url} (model {self.config.model}) failed: "
                                  f"{type(error).__name__}: {error}") from error
        content = response.choices[0].message.content if response.choices else None
        return content or ""


def paraphrase_split(data_dir: Path, split: str, out_path: Path, config: ParaphraseConfig,
                     client: ChatClient | None = None) -> ParaphraseReport:
    """Rewrite the task texts and analyses of a split and write the paraphrase file.

    Raises:
        TrajectoryError: a malformed info.txt.
        ParaphraseError: a failed request.
    """
    trajectories = [read_trajectory(path) for path in find_trajectories(data_dir, split)]
    paraphraser = Paraphraser(config, client)
    jobs: dict[tuple[str, str, tuple[str, ...]], None] = {}
    for trajectory in trajectories:
        for kind, text in _texts(trajectory):
            jobs[(kind, text, tuple(protected_names(trajectory, text)))] = None
    with ThreadPoolExecutor(max_workers=config.workers) as pool:
        results = dict(zip(jobs, pool.map(lambda job: paraphraser.rewrite(job[1], list(job[2]), job[0]), jobs)))

    tasks = {trajectory.task_id: [_variant(trajectory, number, results) for number in range(config.rewrites)]
             for trajectory in trajectories}
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps({"format": FILE_FORMAT, "split": split, "model": config.model,
                                    "rewrites": config.rewrites, "tasks": tasks}, indent=2, ensure_ascii=False) + "\n",
                        encoding="utf-8")
    return paraphraser.report


def _variant(trajectory: Trajectory, number: int,
             results: dict[tuple[str, str, tuple[str, ...]], list[str]]) -> dict[str, object]:
    """Variant `number` (0-based) of a trajectory's texts; a text short of rewrites keeps its original wording."""
    def pick(kind: str, text: str) -> str:
        found = results[(kind, text, tuple(protected_names(trajectory, text)))]
        return found[number] if number < len(found) else text

    return {"task": pick("task instruction", trajectory.task),
            "analyses": {str(step.number): pick("step analysis", step.analysis)
                         for step in trajectory.steps if step.succeeded}}


def _texts(trajectory: Trajectory) -> list[tuple[str, str]]:
    return [("task instruction", trajectory.task)] + [("step analysis", step.analysis)
                                                      for step in trajectory.steps if step.succeeded]


def load_paraphrases(path: Path, trajectories: list[Trajectory]) -> dict[str, list[dict[str, Any]]]:
    """Read a paraphrase file and check it covers exactly these trajectories' tasks and successful steps.

    Returns:
        task id -> its variants (the same number for every task).

    Raises:
        TrajectoryError: naming the file and the task that does not fit.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise TrajectoryError(f"{path}: cannot read the paraphrase file: {error}") from error
    if not isinstance(data, dict) or data.get("format") != FILE_FORMAT or not isinstance(data.get("tasks"), dict):
        raise TrajectoryError(f"{path}: not a paraphrase file (expected format {FILE_FORMAT!r}, written by "
                              "`homiebot data paraphrase`)")
    tasks: dict[str, Any] = data["tasks"]
    for trajectory in trajectories:
        variants = tasks.get(trajectory.task_id)
        if not isinstance(variants, list):
            raise TrajectoryError(f"{path}: task {trajectory.task_id}: no rewrites (was the file made for this split?)")
        successful = {str(step.number) for step in trajectory.steps if step.succeeded}
        for number, variant in enumerate(variants, start=1):
            if not (isinstance(variant, dict) and isinstance(variant.get("task"), str)
                    and isinstance(variant.get("analyses"), dict)):
                raise TrajectoryError(f"{path}: task {trajectory.task_id}, rewrite {number}: expected "
                                      '{"task": ..., "analyses": {...}}')
            unknown = set(variant["analyses"]) - successful
            if unknown:
                raise TrajectoryError(f"{path}: task {trajectory.task_id}, rewrite {number}: analyses for steps "
                                      f"{', '.join(sorted(unknown))} that are not successful steps of "
                                      f"{trajectory.source}")
    counts = {len(tasks[trajectory.task_id]) for trajectory in trajectories}
    if len(counts) > 1:
        raise TrajectoryError(f"{path}: tasks have different numbers of rewrites ({sorted(counts)})")
    return {trajectory.task_id: tasks[trajectory.task_id] for trajectory in trajectories}


def apply_rewrite(trajectory: Trajectory, rewrite: dict[str, Any]) -> Trajectory:
    """The trajectory with the rewrite's task text and analyses (steps it does not mention keep theirs)."""
    analyses: dict[str, str] = rewrite["analyses"]
    steps = tuple(replace(step, analysis=analyses.get(str(step.number), step.analysis)) for step in trajectory.steps)
    return replace(trajectory, task=rewrite["task"], steps=steps)
