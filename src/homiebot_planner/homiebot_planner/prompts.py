"""The EMMOE planner prompts: system prompt, per-step user message, history entries, in-context example.

Everything here is plain text building with no model or ROS dependency. The labelled fields of the user
message, their order, the two request-line variants, the history-entry format and the in-context example are part
of the EMMOE protocol (spec section 2) and are reproduced byte for byte, with one exception: the release's user
text ends with a newline after the request line (utils/homiebot.py, `generate_instruction`), this project's ends at
the request line, which is what HomieBot-135M was trained on (training/samples.py builds its turns with
`build_user_message`), so the newline is not added (docs/fidelity.md, "end of the user message"). The system prompt
is this project's own wording of the protocol's content points.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from emmoe_eval.conversation import (
    LIVE_REQUEST_LINE,
    SFT_REQUEST_LINE,
    format_user_message,
)
from emmoe_core.names import AliasTable, default_alias_table, normalize
from emmoe_core.protocol import ACTIONS, MODELS, SUCCESS_FEEDBACK

ObservationMode = Literal["images", "text"]

# The documented order of the four views (the release sent them as left, back, right, front).
VIEW_ORDER: tuple[str, ...] = ("front", "left", "back", "right")
RELEASE_IMAGE_ORDER: tuple[str, ...] = ("left", "back", "right", "front")

# "live": what the release's planning loop sends; "sft": what the SFT data (the released checkpoint) was trained on.
REQUEST_LINES: dict[str, str] = {"live": LIVE_REQUEST_LINE, "sft": SFT_REQUEST_LINE}
NONE_TEXT = SUCCESS_FEEDBACK

_ACTION_LIST = "[" + ", ".join(ACTIONS) + "]"
_MODEL_LIST = "[" + ", ".join(MODELS) + "]"

_OBSERVATION_SENTENCE: dict[str, str] = {
    "images": (
        "Every turn you receive four first-person RGB pictures taken from where the robot stands, looking to the "
        "front, left, back and right, in that order."
    ),
    "text": (
        "You cannot see pictures. Every turn you instead receive, for each of the four directions around the robot "
        "(front, left, back, right), the names of the objects and furniture visible in that direction."
    ),
}

_SYSTEM_TEMPLATE = """You control a household assistant robot with a mobile base and a single arm with one gripper. \
{observation} Together with that you get the task you must finish, your inventory (what the gripper holds now), \
the history of the subtasks executed so far with whether each succeeded, and the feedback on the last subtask \
(None when it succeeded).

Your job is to decide only the single next subtask. Reply with three lines: an analysis of the situation, the next \
subtask, and the low-level model that should execute it.

Allowed actions: {actions}.
- Write a subtask as [action, target], for example [Go to, fridge] or [Pick, apple].
- Put needs the object and the place: [Put, object, place], for example [Put, apple, brown_table].
- Write [End] once the task is complete.

Allowed models: {models}.
- NoMaD: moving to a place or to a large object such as furniture.
- PixNav: moving to a specific, smaller object.
- octo: opening and closing things such as doors and drawers.
- RT-1-X: picking objects up and putting them down.

Rules:
- You have one gripper: do not Pick or Open anything while holding an object, and do not Put with an empty hand.
- Only choose targets you can currently see.
- Open a closed container before picking something from it or putting something into it.
- Go to a target before you interact with it.
- Give only the next subtask, never a longer plan.

Answer with exactly this template and nothing else:
Analysis: <your reasoning>
Subtask: [<action>, <target>]
Model: <model>
(Use Model: None together with Subtask: [End].)"""


def system_prompt(observation_mode: ObservationMode = "images") -> str:
    """The system prompt of an episode (constant for the whole run).

    Args:
        observation_mode: "images" when the planner sees the four views, "text" when it gets visible-object names.

    Raises:
        ValueError: for an unknown observation mode.
    """
    if observation_mode not in _OBSERVATION_SENTENCE:
        raise ValueError(f"observation_mode must be 'images' or 'text', not {observation_mode!r}")
    return _SYSTEM_TEMPLATE.format(
        observation=_OBSERVATION_SENTENCE[observation_mode], actions=_ACTION_LIST, models=_MODEL_LIST,
    )


def request_line(variant: str) -> str:
    """The closing request line of the user message.

    Raises:
        ValueError: for an unknown variant.
    """
    if variant not in REQUEST_LINES:
        raise ValueError(f"request variant must be one of {sorted(REQUEST_LINES)}, not {variant!r}")
    return REQUEST_LINES[variant]


def shown_objects(names: Sequence[str], locations: Sequence[str], name_of: Callable[[str], str]) -> list[str]:
    """One view's entries for the text observation: each name as `name_of` shows it, a small object with where it
    rests (`apple (on desk)`, `milk (in fridge)`), repeated entries once.

    Args:
        names: canonical names, nearest first.
        locations: parallel to `names`: "on <canonical>", "in <canonical>" or "" (missing entries count as "").
        name_of: canonical -> shown name.
    """
    entries = []
    for index, name in enumerate(names):
        relation, _, receptacle = (locations[index] if index < len(locations) else "").partition(" ")
        entries.append(f"{name_of(name)} ({relation} {name_of(receptacle)})" if receptacle else name_of(name))
    return list(dict.fromkeys(entries))


def format_visible_objects(visible: Mapping[str, Sequence[str]]) -> str:
    """The text observation block given to text-only planners instead of the four images.

    Args:
        visible: view name ("front", "left", "back", "right") -> entries visible in it (`shown_objects`).

    Returns:
        `Visible objects:` followed by one line per view in the documented order, each ending in a newline.
    """
    lines = ["Visible objects:"]
    for view in VIEW_ORDER:
        names = list(dict.fromkeys(visible.get(view, ())))
        lines.append(f"{view}: {', '.join(names) if names else NONE_TEXT}")
    return "\n".join(lines) + "\n"


def build_user_message(
    task: str,
    inventory: Sequence[str],
    history: str | None,
    feedback: str | None,
    variant: str = "live",
    visible: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """The per-step user message with the protocol's labelled fields in their order.

    Args:
        task: the instruction of the episode.
        inventory: held objects (empty when the hand is empty).
        history: the concatenated history entries, or None (shown as `None`) on the first step.
        feedback: the last feedback string, or None (shown as `None`) after a success.
        variant: which request line closes the message ("live" or "sft").
        visible: for text-only planners, the visible-object names per view; the block is placed before `Task:`,
            where an image-capable planner gets its images.
    """
    prefix = format_visible_objects(visible) if visible is not None else ""
    feedback_text = feedback if feedback and feedback.strip() else NONE_TEXT
    return prefix + format_user_message(task, list(inventory), history or "", feedback_text, request_line(variant))


# The in-context example of the EMMOE paper (Appendix) and release (scripts/eval/eval_Qwen2VL.py and
# eval_MiniCPM.py of silence143/EMMOE, Apache-2.0), verbatim: protocol data, not this project's wording.
# The release sends it, as text only, between the system prompt and the current turn of untuned open models.
IN_CONTEXT_EXAMPLE_USER = (
    "here is an example output, please strictly follow its format and system reminders in your output:\n"
    "Analysis: According to my final task, I need to fetch apples first, but it's a better choice to go the fridge "
    "and open it first, which will avoid potential conflicts, so I should go to the fridge next\n"
    "Subtask: [Go to, fridge]\n"
    "Model: NoMaD\n"
)
IN_CONTEXT_EXAMPLE_ASSISTANT = "I will surely follow the given format, now you can send prompt to me."


@dataclass(frozen=True)
class InContextExample:
    """One exchange shown to untuned models before each inference."""

    user: str
    assistant: str


def in_context_example() -> InContextExample:
    """The paper's example exchange: the user shows a well-formed answer, the assistant promises to follow it."""
    return InContextExample(user=IN_CONTEXT_EXAMPLE_USER, assistant=IN_CONTEXT_EXAMPLE_ASSISTANT)


def display_name(canonical: str, table: AliasTable | None = None) -> str:
    """A planner-friendly name for a canonical entry: `013_apple` -> `apple`, `frl_apartment_sofa` -> `sofa`.

    Prefers the first single-word alias that refers to this entry only, then the first single-word alias, then the
    canonical name itself (always resolvable through the alias table).
    """
    table = table or default_alias_table()
    aliases = [alias for alias in table.aliases.get(canonical, ()) if " " not in alias.strip()]
    for alias in aliases:
        owners = table.canonicals(alias)
        if owners == {canonical} or all(normalize(display) == normalize(alias)
                                        for display in owners if display != canonical):
            return alias
    if aliases:
        return aliases[0]
    return canonical
