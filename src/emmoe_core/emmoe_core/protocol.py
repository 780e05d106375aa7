"""The EMMOE protocol vocabulary shared by the planner, the executor and the evaluator.

Action and model lists, the exact feedback strings of every error type (models are trained on them,
so they are byte-exact), and the bracketed subtask notation used in info.txt, keypath.json and the
planner's output (`[Go to, fridge]`, `[Put, apple, fridge]`, `[End]`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from emmoe_core.names import AliasTable, default_alias_table, normalize

# The four head-camera views the planner sees at every step, in the order of its prompt and of the info.txt images.
VIEWS: tuple[str, ...] = ("front", "left", "back", "right")
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

# Error type -> feedback template; {action} is the verb as the planner wrote it, lower-cased; {target} the name.
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
# How feedback strings are filled in: "release" as the released executor (infer.py lower-cases the whole subtask
# before building them), "verbatim" this project's earlier form (F1 keeps the action, targets as written).
FEEDBACK_STYLES: tuple[str, ...] = ("release", "verbatim")
# Longest action or object name repeated whole in feedback and log lines (real EMMOE names are under 40).
MAX_ECHOED = 200
# Error categories of the paper's Figure 3: format, logical, distance, execution.
ERROR_CATEGORY: dict[str, str] = {code: {"F": "format", "L": "logical", "D": "distance", "E": "execution"}[code[0]]
                                  for code in ERROR_TYPES}


def echoed(text: str) -> str:
    """`text` as feedback and logs may repeat it: whole up to MAX_ECHOED characters, else cut with "..." (a planner
    that emits a 100,000-character target must not have it copied into every message and log line)."""
    return text if len(text) <= MAX_ECHOED else text[:MAX_ECHOED - 3] + "..."


def feedback_for(error_type: str, action: str, target: str = "", style: str = "release") -> str:
    """The exact feedback string of an error type.

    Style "release" (the default): action and target trimmed and lower-cased, every type, F1 included, byte for byte
    what the release's executor sends (`[Pick, Red_Apple]` -> `red_apple does not exist! ...`). Style "verbatim":
    F1 keeps the action as written, the other types use the lower-cased verb, the target stays as written. Either way
    an action or target longer than MAX_ECHOED characters is cut (`echoed`).

    Raises:
        ValueError: for an unknown error type or style.
    """
    if error_type not in FEEDBACK_TEMPLATES:
        raise ValueError(f"unknown EMMOE error type {error_type!r}; expected one of {', '.join(ERROR_TYPES)}")
    if style == "release":
        verb, name = action.strip().lower(), target.strip().lower()
    elif style == "verbatim":
        verb, name = (action if error_type == "F1" else action.lower()), target
    else:
        raise ValueError(f"unknown feedback style {style!r}; expected one of {', '.join(FEEDBACK_STYLES)}")
    return FEEDBACK_TEMPLATES[error_type].format(action=echoed(verb), target=echoed(name))


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
    """A subtask as the planner wrote it: the bracketed action, target and (Put only) place, and the model chosen.

    The one subtask type of the stack (the planner's, the executor's and the evaluator's). `str()` gives the bracketed
    notation, without the model.

    Attributes:
        action: the verb as written ("Go to", "pick", ...).
        target: the object or place.
        place: Put's receptacle ("" otherwise).
        model: the low-level model chosen ("NoMaD", ...; "" or "None" for End and where none is given).
    """

    action: str
    target: str = ""
    place: str = ""
    model: str = ""

    def __str__(self) -> str:
        return format_subtask(self.action, self.target, self.place)

    @property
    def verb(self) -> str:
        """Lower-cased action with single spaces ("go to")."""
        return " ".join(self.action.lower().split())

    @property
    def canonical_action(self) -> str | None:
        """The action as it appears in ACTIONS ("Go to"), or None when it is not in the list."""
        return next((action for action in ACTIONS if action.lower() == self.verb), None)

    @property
    def checked_target(self) -> str:
        """The name the checks look up: Put's place (its last argument as written), the target otherwise."""
        if self.verb == "put":
            return (self.place or self.target).strip()
        return self.target.strip()

    @property
    def canonical_model(self) -> str | None:
        """The model as it appears in MODELS ("RT-1-X"), or None."""
        key = normalize(self.model)
        return next((model for model in MODELS if normalize(model) == key), None)

    @property
    def routed_model(self) -> str:
        """The model whose server runs the subtask: the chosen one when it is in the list, else the first model the
        system prompt assigns to the action (an unchecked model, as the release ignores the choice)."""
        if self.canonical_model is not None:
            return self.canonical_model
        action = self.canonical_action
        return (MODELS_FOR_ACTION.get(action or "") or MODELS)[0]


_YCB_NAME = re.compile(r"^\d{3}(-[a-z])?_")


# Small objects that are open containers: a Put may name them as its place ("place it in a bowl"), as the executor
# allows (an object's top serves as the place).
OPEN_CONTAINER_OBJECTS: tuple[str, ...] = ("024_bowl", "025_mug")


def is_small_object(canonical: str) -> bool:
    """Whether a canonical name is a small graspable object (a YCB id such as `013_apple`) rather than furniture."""
    return bool(_YCB_NAME.match(canonical))


def default_model(subtask: SubtaskText, table: AliasTable | None = None) -> str:
    """The model the system prompt assigns to a subtask's action, for a subtask that names none.

    Go to: PixNav for small objects (every entry the target may name is a YCB id), NoMaD for places and furniture;
    other actions: their only model; End: "None".
    """
    allowed = MODELS_FOR_ACTION.get(subtask.action, ())
    if not allowed:
        return "None"
    if subtask.action == "Go to":
        canonicals = (table or default_alias_table()).canonicals(subtask.target)
        return "PixNav" if canonicals and all(is_small_object(name) for name in canonicals) else "NoMaD"
    return allowed[0]


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
