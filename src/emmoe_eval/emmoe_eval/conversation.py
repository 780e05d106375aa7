"""The official run format, `conversation.json`, and the run reconstruction the EMMOE release performs on it.

`conversation.json` is a JSON list with one string per planner round:
`"USER:\\n{user message}ASSISTANT:\\n{planner output}\\n"`. The user message of the live loop is
`Task: ...\\nInventory: ...\\nHistorical Execution: ...\\nFeedback: ...\\n{request line}`, where the history lists
every executed step as `({round}) {subtask}({signal}) ` (subtask = bracket content, signal success or fail).

The release logs a round only when its output parsed (with its own patterns, `parse_release_output`); after 5
unparseable samples it stops the run without logging that round. The file does not record the outcome of the last
round's subtask. `steps_from_conversation` reconstructs: the last round's history gives steps 1..n-1 (their feedback
strings come from the next round's `Feedback:` field); the last output is step n: End (a success) when it says
`[End]`, otherwise the last subtask with an unknown outcome (scored as not successful and not counted as an error);
an output that does not parse even with the release's patterns is left out (with a warning), never turned into End.
`release_reconstruction` turns any run into what the release's notebooks see (quirk 1): the history alone, plus End
when the last entry contains "End" anywhere (the notebooks test the whole entry, user message included).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from emmoe_core.json_text import JSONTextError, TextFileError, decode_json, read_text_file
from emmoe_core.protocol import SUCCESS_FEEDBACK, SubtaskText, format_subtask, parse_subtask
from emmoe_eval.runs import Run, Step, run_identity

CONVERSATION_FILE = "conversation.json"
LIVE_REQUEST_LINE = "Now based on the instruction above, please output Analysis, Subtask and Model in the mentioned format."
SFT_REQUEST_LINE = "Now, please output Analysis, Subtask and Model, according to the instruction above."
_ROUND = re.compile(r"^USER:\n(?P<user>.*?)ASSISTANT:\n(?P<output>.*?)\n?$", re.DOTALL)
_HISTORY = re.compile(r"Historical Execution:(?P<history>.*?)\nFeedback:(?P<feedback>[^\n]*)", re.DOTALL)
_HISTORY_ENTRY = re.compile(r"\((?P<round>\d+)\)\s*(?P<subtask>.*?)\s*\((?P<signal>success|fail\w*)\)", re.DOTALL)
_STRICT_SUBTASK = re.compile(r"Subtask:\s*(\[[^\[\]]*\])")
_RELAXED_SUBTASK = re.compile(r"Subtask:\s*([^\n]*)")
_MODEL = re.compile(r"Model:\s*([^\n]*)")
_ANALYSIS = re.compile(r"Analysis:\s*(.*?)\s*(?:\nSubtask:|$)", re.DOTALL)
_RELEASE_PATTERNS = (re.compile(r".*Analysis: *(.+?) *Subtask: *\[(.*?)\].*Model: *(.*?)$", re.DOTALL),
                     re.compile(r".*Analysis: *(.+?) *Subtask: *(.*?) *Model: *(.*?)$", re.DOTALL))


class ConversationError(ValueError):
    """conversation.json does not follow the format; the message names the file and round."""


@dataclass(frozen=True)
class Round:
    """One planner round: the user message and the planner's output."""

    user: str
    output: str


def format_round(user: str, output: str) -> str:
    """One conversation.json entry: `USER:\\n{user}ASSISTANT:\\n{output}\\n`."""
    return f"USER:\n{user}ASSISTANT:\n{output}\n"


def parse_round(text: str, where: str) -> Round:
    """Split a conversation.json entry into user message and output.

    Raises:
        ConversationError: when the entry lacks the USER/ASSISTANT labels.
    """
    match = _ROUND.match(text)
    if match is None:
        raise ConversationError(f"{where}: expected 'USER:\\n...ASSISTANT:\\n...'")
    return Round(match.group("user"), match.group("output"))


def format_history_entry(round_number: int, subtask: SubtaskText, success: bool) -> str:
    """`({round}) {subtask}({signal}) `, e.g. `(3) Pick, apple(success) `."""
    return f"({round_number}) {format_subtask(subtask.action, subtask.target, subtask.place)[1:-1]}" \
           f"({'success' if success else 'fail'}) "


def format_user_message(task: str, inventory: Sequence[str], history: str, feedback: str,
                        request_line: str = LIVE_REQUEST_LINE) -> str:
    """The live loop's per-step user message, fields in protocol order.

    Args:
        task: the instruction.
        inventory: held objects (empty: "None").
        history: the concatenated history entries ("" on the first step: "None").
        feedback: the previous step's feedback ("None" after a success).
        request_line: LIVE_REQUEST_LINE (live loop) or SFT_REQUEST_LINE (SFT data).
    """
    return (f"Task: {task}\nInventory: {' '.join(inventory) if inventory else 'None'}\n"
            f"Historical Execution: {history or 'None'}\nFeedback: {feedback}\n{request_line}")


def format_output(step: Step) -> str:
    """The planner output of a step: its raw output when recorded, else the three-line template."""
    if step.raw_output:
        return step.raw_output
    model = step.model or "None"
    return f"Analysis: {step.analysis or ''}\nSubtask: {step.subtask}\nModel: {model}"


def conversation_from_steps(task: str, steps: Sequence[Step], request_line: str = LIVE_REQUEST_LINE) -> list[str]:
    """Rebuild the conversation.json entries of a run from its steps, as the live loop would have logged them.

    The inventory shown at step i is the inventory after step i-1 (empty at step 1; unknown inventories show "None").
    """
    entries: list[str] = []
    history = ""
    feedback = SUCCESS_FEEDBACK
    inventory: Sequence[str] = ()
    for round_number, step in enumerate(steps, start=1):
        user = format_user_message(task, inventory, history, feedback, request_line)
        entries.append(format_round(user, format_output(step)))
        history += format_history_entry(round_number, step.subtask, step.success)
        feedback = step.feedback if step.feedback is not None else SUCCESS_FEEDBACK
        inventory = step.inventory or ()
    return entries


def write_conversation(path: Path | str, entries: Sequence[str]) -> None:
    """Write conversation.json (a JSON list of round strings)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(list(entries), indent=4, ensure_ascii=False) + "\n", encoding="utf-8")


def read_conversation(path: Path | str) -> list[Round]:
    """Read and split conversation.json.

    Raises:
        ConversationError: for unreadable files, invalid JSON or malformed rounds.
    """
    path = Path(path)
    try:
        data = decode_json(read_text_file(path))
    except JSONTextError as error:
        raise ConversationError(f"{path}:{error.lineno}:{error.colno}: invalid JSON: {error.msg}") from None
    except TextFileError as error:
        raise ConversationError(f"{path}: cannot read: {error.reason}") from None
    if not isinstance(data, list) or not all(isinstance(entry, str) for entry in data):
        raise ConversationError(f"{path}: expected a JSON list of 'USER:...ASSISTANT:...' strings")
    return [parse_round(entry, f"{path}: round {number}") for number, entry in enumerate(data, start=1)]


@dataclass(frozen=True)
class ParsedOutput:
    """The fields of one planner output; `subtask` is None when the output does not parse."""

    subtask: SubtaskText | None
    model: str
    analysis: str


def parse_output(output: str) -> ParsedOutput:
    """Extract Subtask, Model and Analysis from a planner output (bracketed subtask first, then the relaxed form)."""
    match = _STRICT_SUBTASK.search(output) or _RELAXED_SUBTASK.search(output)
    subtask: SubtaskText | None = None
    if match is not None:
        try:
            subtask = parse_subtask(match.group(1))
        except ValueError:
            subtask = None
    model_match = _MODEL.search(output)
    analysis_match = _ANALYSIS.search(output)
    return ParsedOutput(subtask, model_match.group(1).strip() if model_match else "",
                        analysis_match.group(1).strip() if analysis_match else "")


def parse_release_output(output: str) -> ParsedOutput:
    """Extract the fields as the release's eval scripts do: the bracket pattern, then the one without brackets.

    Both patterns are DOTALL and start with a greedy `.*`, so the last `Analysis:` block wins and any text may stand
    between `]` and `Model:`. `subtask` is None when neither pattern matches or the subtask text has more than
    three parts.
    """
    for pattern in _RELEASE_PATTERNS:
        match = pattern.search(output)
        if match is not None:
            try:
                subtask: SubtaskText | None = parse_subtask(match.group(2).strip())
            except ValueError:
                subtask = None
            return ParsedOutput(subtask, match.group(3).strip(), match.group(1).strip())
    return ParsedOutput(None, "", "")


@dataclass(frozen=True)
class _HistoryEntry:
    subtask: SubtaskText
    success: bool


def feedback_of(user: str) -> str | None:
    """The `Feedback:` field of a user message (`None` text after a success), or None when it has no such field."""
    match = _HISTORY.search(user)
    return match.group("feedback").strip() if match else None


def _history(user: str, where: str) -> tuple[list[_HistoryEntry], str]:
    match = _HISTORY.search(user)
    if match is None:
        raise ConversationError(f"{where}: the user message has no 'Historical Execution:' / 'Feedback:' fields")
    text = match.group("history").strip()
    entries: list[_HistoryEntry] = []
    if text != "None":
        for entry in _HISTORY_ENTRY.finditer(text):
            try:
                subtask = parse_subtask(entry.group("subtask"))
            except ValueError as error:
                raise ConversationError(f"{where}: history entry ({entry.group('round')}): {error}") from None
            entries.append(_HistoryEntry(subtask, entry.group("signal") == "success"))
    return entries, match.group("feedback").strip()


def steps_from_conversation(rounds: Sequence[Round], where: str) -> tuple[list[Step], list[str]]:
    """Reconstruct the executed steps of a run from its rounds (see the module docstring).

    Args:
        rounds: the rounds of conversation.json.
        where: the file name for messages.

    Returns:
        (steps, problems).

    Raises:
        ConversationError: when a round lacks the history fields.
    """
    if not rounds:
        return [], [f"{where}: no rounds"]
    problems: list[str] = []
    history, _ = _history(rounds[-1].user, f"{where}: round {len(rounds)}")
    feedbacks = [_history(item.user, f"{where}: round {number}")[1]
                 for number, item in enumerate(rounds[1:], start=2)]
    if len(history) != len(rounds) - 1:
        problems.append(f"{where}: the last round's history lists {len(history)} steps for {len(rounds)} rounds")
    steps: list[Step] = []
    for number, entry in enumerate(history, start=1):
        parsed = parse_output(rounds[number - 1].output) if number <= len(rounds) else ParsedOutput(None, "", "")
        feedback = feedbacks[number - 1] if number <= len(feedbacks) else None
        if entry.success:
            feedback = SUCCESS_FEEDBACK
        steps.append(Step(step=number, action=entry.subtask.action, target=entry.subtask.target,
                          place=entry.subtask.place, model=parsed.model, success=entry.success, feedback=feedback,
                          analysis=parsed.analysis or None,
                          raw_output=rounds[number - 1].output if number <= len(rounds) else None))
    last_output = rounds[-1].output
    last = parse_release_output(last_output)
    number = len(steps) + 1
    if last.subtask is None:
        problems.append(f"{where}: the last output does not parse (the release logs only parsed outputs); its "
                        "subtask is unknown and left out")
    elif last.subtask.action == "End":
        steps.append(Step(step=number, action="End", model=last.model, analysis=last.analysis or None,
                          raw_output=last_output))
    else:
        steps.append(Step(step=number, action=last.subtask.action, target=last.subtask.target,
                          place=last.subtask.place, model=last.model, success=False, feedback=None,
                          analysis=last.analysis or None, raw_output=last_output))
    return steps, problems


def read_conversation_run(path: Path | str, task_id: str | None = None, run_id: str | None = None) -> Run:
    """Read conversation.json into a Run; never raises for bad content (the run is marked corrupt).

    Args:
        path: the file.
        task_id: the task id; by default the name of the folder above the run folder.
        run_id: the run id; by default the run folder's name.
    """
    path = Path(path)
    task_id, run_id = run_identity(path, task_id, run_id)
    try:
        rounds = read_conversation(path)
        steps, problems = steps_from_conversation(rounds, str(path))
    except ConversationError as error:
        return Run(task_id, run_id, [], path, [f"{error}; the run is scored as failed"], True)
    last_entry = format_round(rounds[-1].user, rounds[-1].output) if rounds else None
    return Run(task_id, run_id, steps, path, problems, last_entry=last_entry)


def release_reconstruction(steps: Sequence[Step], last_entry: str | None = None) -> list[Step]:
    """The run as the released notebooks reconstruct it (quirk 1 of `--compat official`).

    The release reads the last round's `Historical Execution` line, which lists every executed step but the last, and
    appends End only when the last conversation entry contains "End" (anywhere, case-sensitive). Applied to steps
    reconstructed from conversation.json this gives exactly the release's run; applied to a trajectory it gives what
    the release would have seen of it.

    Args:
        steps: the run's steps.
        last_entry: the last conversation.json entry (user message and output) when known; otherwise the last
            step's raw output is tested (or, without one, whether it is End).
    """
    if not steps:
        return []
    last = steps[-1]
    if last_entry is not None:
        said_end = "End" in last_entry
    else:
        said_end = "End" in last.raw_output if last.raw_output is not None else last.is_end
    kept = list(steps[:-1])
    if said_end:
        kept.append(Step(step=len(kept) + 1, action="End", model=last.model, raw_output=last.raw_output))
    return kept
