"""The EMMOE protocol vocabulary shared by the planner, the executor and the evaluator.

Action and model lists, the exact feedback strings of every error type (models are trained on them,
so they are byte-exact), and the bracketed subtask notation used in info.txt, keypath.json and the
planner's output (`[Go to, fridge]`, `[Put, apple, fridge]`, `[End]`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ACTIONS: tuple[str, ...] = ("Go to", "Pick", "Put", "Open", "Close", "End")
MODELS: tuple[str, ...] = ("NoMaD", "PixNav", "octo", "RT-1-X")
# Which models the planner is told fit each action (the system prompt's descriptions).
MODELS_FOR_ACTION: dict[str, tuple[str, ...]] = {
    "Go to": ("NoMaD", "PixNav"),
    "Pick": ("RT-1-X",),
    "Put": ("RT-1-X",),
    "Open": ("octo",),
    "Close": ("octo",),
    "End": (),
}
SUCCESS_FEEDBACK = "None"

# Error type -> feedback template; {action} is the lower-cased verb as the planner wrote it.
FEEDBACK_TEMPLATES: dict[str, str] = {
    "F1": "{action} is not in the action list! You should only choose actions in the list.",
    "F2": "{target} does not exist! Please choose another object",
    "L1": "Unable to {action}, the hand is full",
    "L2": "Unable to {action}, the hand is empty",
    "L3": "Unable to {action}, the {target} is closed, you should open it first",
    "L4": "Can not {action} {target}! Please choose another object",
    "D1": "Unable to {action}, the target is far away",
    "D2": "Unable to {action}, the target is too close",
    "E1": "Unable to {action}, the subtask is too difficult to perform",
    "E2": "Unable to {action}, and the object is missing",
    "E3": "Unable to {action}, time out",
}
ERROR_TYPES: tuple[str, ...] = tuple(FEEDBACK_TEMPLATES)
# Error categories of the paper's Figure 3: format, logical, distance, execution.
ERROR_CATEGORY: dict[str, str] = {code: {"F": "format", "L": "logical", "D": "distance", "E": "execution"}[code[0]]
                                  for code in ERROR_TYPES}


def feedback_for(error_type: str, action: str, target: str = "") -> str:
    """The exact feedback string of an error type.

    F1 keeps the action as written; every other type uses the lower-cased verb.

    Raises:
        ValueError: for an unknown error type.
    """
    if error_type not in FEEDBACK_TEMPLATES:
        raise ValueError(f"unknown EMMOE error type {error_type!r}; expected one of {', '.join(ERROR_TYPES)}")
    verb = action if error_type == "F1" else action.lower()
    return FEEDBACK_TEMPLATES[error_type].format(action=verb, target=target)


def _template_pattern(template: str) -> re.Pattern[str]:
    pattern = re.escape(template).replace(r"\{action\}", "(?P<action>.+?)").replace(r"\{target\}", "(?P<target>.+?)")
    return re.compile(f"^{pattern}$", re.DOTALL)


_FEEDBACK_PATTERNS = [(code, _template_pattern(template)) for code, template in FEEDBACK_TEMPLATES.items()]


def classify_feedback(feedback: str | None) -> str | None:
    """The error type of a feedback string, None for success ("None", empty) or an unrecognised string."""
    if feedback is None:
        return None
    text = feedback.strip()
    if text in ("", SUCCESS_FEEDBACK):
        return None
    for code, pattern in _FEEDBACK_PATTERNS:
        if pattern.match(text):
            return code
    return None


@dataclass(frozen=True)
class SubtaskText:
    """A subtask in the bracketed notation: action, target and (Put only) place, as written."""

    action: str
    target: str = ""
    place: str = ""

    def __str__(self) -> str:
        return format_subtask(self.action, self.target, self.place)


def format_subtask(action: str, target: str = "", place: str = "") -> str:
    """`[Go to, fridge]`, `[Put, apple, fridge]`, `[End]`."""
    parts = [part for part in (action, target, place) if part]
    return "[" + ", ".join(parts) + "]"


_BRACKETED = re.compile(r"^\s*\[(?P<body>[^\[\]]*)\]\s*$")


def parse_subtask(text: str) -> SubtaskText:
    """Parse `[Put, apple, fridge]` (brackets optional) into its parts, whitespace trimmed.

    Raises:
        ValueError: when the text is empty or has more than three comma-separated parts.
    """
    match = _BRACKETED.match(text)
    body = match.group("body") if match else text
    parts = [part.strip() for part in body.split(",")]
    if not parts or not parts[0]:
        raise ValueError(f"empty subtask: {text!r}")
    if len(parts) > 3:
        raise ValueError(f"a subtask has at most three parts (action, target, place): {text!r}")
    parts += [""] * (3 - len(parts))
    return SubtaskText(*parts)
