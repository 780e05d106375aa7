r"""Parsing the planner's three-line answer (Analysis / Subtask / Model) and checking it against the protocol.

Three parsers, chosen by `PlannerConfig.parser` (see `PARSERS`):
- "release": the EMMOE release's two patterns for open models, in its order (DOTALL, `re.search`):
  `.*Analysis: *(.+?) *Subtask: *\[(.*?)\].*Model: *(.*?)$`, then the same without the brackets. With their
  quirks: any text may stand between `]` and `Model:`, the brackets may span lines, the greedy leading `.*` makes
  the LAST `Analysis:` block win, and the greedy `.*` before `Model:` makes the model everything after the last
  `Model:` label (later lines included). The
  subtask is the bracket content split on commas as the release's executor splits it (first part the action, last
  part the place of a Put); nothing else is checked, so `[Go to, fridge` (no closing bracket, second pattern) gives
  the action `[Go to`, which the executor answers with F1, exactly as in the release.
- "release_bracket": only the first of those patterns, what the release's API-model scripts (GPT-4o, Gemini) use.
- "strict": this project's parser: a bracketed pattern that allows only whitespace between `]` and `Model:`, then
  a relaxed one without brackets (or with only an opening or closing one) but only on one line, without stray
  brackets inside, and only when it splits into at most three comma-separated parts; the FIRST answer wins.

One deliberate difference in every parser: an empty subtask (`Subtask: []`) is unparsable here (the release would
send an empty action and get F1 back; an empty action is this project's run-end marker). Parsing never raises:
anything else is "unparsable" (None).

Parsing and validity are separate on purpose: a parsable answer with an unknown action is what the benchmark sends
to the executor, which answers with the F1 feedback. `validity_problems` tells the caller what is wrong so that a
planner may choose to re-sample instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from emmoe_core.protocol import ACTIONS, MODELS, MODELS_FOR_ACTION, SubtaskText, format_subtask, parse_subtask

PatternName = Literal["strict", "relaxed", "release_bracket", "release_plain"]
PARSERS: tuple[str, ...] = ("release", "release_bracket", "strict")

_STRICT = re.compile(
    r"Analysis:(?P<analysis>.*?)Subtask:[ \t]*\[(?P<subtask>[^\[\]\n]*)\]\s*Model:[ \t]*(?P<model>[^\n]*)",
    re.DOTALL,
)
_RELAXED = re.compile(
    r"Analysis:(?P<analysis>.*?)Subtask:[ \t]*(?P<subtask>[^\n]*?)\s*Model:[ \t]*(?P<model>[^\n]*)",
    re.DOTALL,
)
# The release's patterns, verbatim (scripts/eval/eval_*.py of silence143/EMMOE).
_RELEASE_BRACKET = re.compile(r".*Analysis: *(.+?) *Subtask: *\[(.*?)\].*Model: *(.*?)$", re.DOTALL)
_RELEASE_PLAIN = re.compile(r".*Analysis: *(.+?) *Subtask: *(.*?) *Model: *(.*?)$", re.DOTALL)
_RELEASE_PATTERNS: dict[str, tuple[tuple[PatternName, re.Pattern[str]], ...]] = {
    "release": (("release_bracket", _RELEASE_BRACKET), ("release_plain", _RELEASE_PLAIN)),
    "release_bracket": (("release_bracket", _RELEASE_BRACKET),),
}
# Words a model may write for "no model" after [End].
_NO_MODEL = ("", "none", "null", "n/a")
_MODEL_DECORATION = " \t\r`'\"*."


@dataclass(frozen=True)
class ParsedOutput:
    """One parsed planner answer.

    Attributes:
        analysis: the Analysis text, trimmed.
        subtask: action, target and place exactly as written (trimmed).
        model: the model name as written, trimmed of quotes and a final full stop.
        pattern: which pattern matched ("strict", "relaxed", "release_bracket" or "release_plain").
    """

    analysis: str
    subtask: SubtaskText
    model: str
    pattern: PatternName

    @property
    def subtask_text(self) -> str:
        """The subtask in bracketed notation, e.g. `[Put, apple, fridge]`."""
        return format_subtask(self.subtask.action, self.subtask.target, self.subtask.place)

    @property
    def is_end(self) -> bool:
        """Whether the answer ends the run."""
        return self.subtask.action == "End"


def _from_match(match: re.Match[str], pattern: PatternName) -> ParsedOutput | None:
    subtask_text = match.group("subtask").strip()
    if pattern == "relaxed":
        subtask_text = subtask_text.strip("[]").strip()
        if "[" in subtask_text or "]" in subtask_text:  # stray brackets: neither form, not a subtask
            return None
    if not subtask_text:
        return None
    try:
        subtask = parse_subtask(subtask_text)
    except ValueError:
        return None
    model = match.group("model").strip(_MODEL_DECORATION)
    return ParsedOutput(analysis=match.group("analysis").strip(), subtask=subtask, model=model, pattern=pattern)


def _release_subtask(text: str) -> SubtaskText | None:
    """The bracket content split as the release's executor splits it: action first, place last (Put)."""
    parts = [part.strip() for part in text.strip().split(",")]
    if not parts[0]:
        return None
    if len(parts) == 1:
        return SubtaskText(parts[0])
    return SubtaskText(parts[0], parts[1], parts[-1] if len(parts) > 2 else "")


def _parse_release(text: str, parser: str) -> ParsedOutput | None:
    for pattern, regex in _RELEASE_PATTERNS[parser]:
        match = regex.search(text)
        if match is None:
            continue
        subtask = _release_subtask(match.group(2))
        if subtask is None:
            return None
        return ParsedOutput(analysis=match.group(1).strip(), subtask=subtask, model=match.group(3).strip(),
                            pattern=pattern)
    return None


def _parse_strict(text: str) -> ParsedOutput | None:
    for pattern, regex in (("strict", _STRICT), ("relaxed", _RELAXED)):
        match = regex.search(text)
        if match is not None:
            parsed = _from_match(match, pattern)  # type: ignore[arg-type]
            if parsed is not None:
                return parsed
    return None


def parse_output(text: str, parser: str = "strict") -> ParsedOutput | None:
    """Parse a planner answer with one of `PARSERS` (see the module docstring).

    Args:
        text: the model's raw output (any string).
        parser: "release", "release_bracket" or "strict".

    Returns:
        The parsed answer, or None when no pattern yields a subtask. Never raises for any text.

    Raises:
        ValueError: for an unknown parser name.
    """
    if parser not in PARSERS:
        raise ValueError(f"parser must be one of {', '.join(PARSERS)}, not {parser!r}")
    if not isinstance(text, str):
        return None
    if parser == "strict":
        return _parse_strict(text)
    return _parse_release(text, parser)


def validity_problems(parsed: ParsedOutput) -> tuple[str, ...]:
    """What makes a parsed answer invalid under the protocol (empty when valid).

    Checks the action against the action list, the number of arguments (Put takes object and place, End none,
    the others one target) and the model against the model list (End takes no model).
    """
    problems: list[str] = []
    action, target, place = parsed.subtask.action, parsed.subtask.target, parsed.subtask.place
    if action not in ACTIONS:
        problems.append(f"action {action!r} is not one of {', '.join(ACTIONS)}")
        return tuple(problems)
    if action == "End":
        if target or place:
            problems.append("[End] takes no arguments")
        if parsed.model.lower() not in _NO_MODEL:
            problems.append(f"[End] takes no model, got {parsed.model!r}")
        return tuple(problems)
    if not target:
        problems.append(f"[{action}] needs a target")
    if action == "Put" and not place:
        problems.append("[Put] needs an object and a place: [Put, object, place]")
    if action != "Put" and place:
        problems.append(f"[{action}] takes one target, not two")
    if parsed.model not in MODELS:
        problems.append(f"model {parsed.model!r} is not one of {', '.join(MODELS)}")
    return tuple(problems)


def is_valid(parsed: ParsedOutput | None) -> bool:
    """Whether an answer parsed and is valid under the protocol."""
    return parsed is not None and not validity_problems(parsed)


def model_fits_action(parsed: ParsedOutput) -> bool:
    """Whether the chosen model is one the system prompt recommends for the action (End: no model)."""
    if parsed.subtask.action not in MODELS_FOR_ACTION:
        return False
    allowed = MODELS_FOR_ACTION[parsed.subtask.action]
    if not allowed:
        return parsed.model.lower() in _NO_MODEL
    return parsed.model in allowed
