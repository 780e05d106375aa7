"""SFT samples and DPO rows from one trajectory, exactly as EMMOE.md section 6 defines them.

SFT human turn of step i (the planner's input when it chose subtask i):

    Task: <task>\\nInventory: <inv>\\nHistorical Execution:<history>\\nFeedback: <fb>\\n<request line>

* `<history>` is ` None` for the first step, otherwise one line `({j}){decision} ({success|fail})\\n` per earlier
  step j (failed ones included), so it ends in a newline and is followed by a blank-looking `\\n\\nFeedback:`; there
  is no space after the colon except in ` None`;
* `<inv>` and `<fb>` are those recorded after step i-1 (`None` and `None` before the first step);
* the request line is the SFT variant `Now, please output Analysis, Subtask and Model, according to the
  instruction above.`, with no newline after it.

SFT answer: `Analysis: <analysis>\\nSubtask: <[...] as written>\\nModel: <model or None>`. Only successful steps
become SFT samples (End included).

DPO rows (`prompt`, `chosen`, `rejected`; prompt = the step's human turn, text only; chosen/rejected = the answer
without its Analysis line):
* natural: a failed step i directly followed by a successful non-End step i+1 gives (prompt I_i, chosen O_{i+1},
  rejected O_i). A failure directly followed by End gives no row, so that End never appears as chosen;
* for every successful non-End step i, three rows with prompt I_i and chosen O_i:
  model change (NoMaD<->PixNav, octo<->RT-1-X), order change (rejected = the answer of the next successful step,
  often End) and action change (Pick->Fetch, Put->Place, Go to->Move, Open->Pull, Close->Push).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from emmoe_eval.conversation import SFT_REQUEST_LINE
from emmoe_core.names import default_alias_table
from emmoe_core.protocol import format_subtask, parse_subtask

from homiebot_planner.memory import PlannerMemory
from homiebot_planner.prompts import build_user_message, display_name, shown_objects
from homiebot_planner.training.trajectory import Trajectory, TrajectoryError, TrajectoryStep

NO_VALUE = "None"
MODEL_SWAP: dict[str, str] = {"NoMaD": "PixNav", "PixNav": "NoMaD", "octo": "RT-1-X", "RT-1-X": "octo"}
ACTION_SWAP: dict[str, str] = {"Pick": "Fetch", "Put": "Place", "Go to": "Move", "Open": "Pull", "Close": "Push"}
DPO_KINDS: tuple[str, ...] = ("natural", "model", "order", "action")
# "release": the human turn of the released SFT data (below); "planner": the run-time planner's user message with
# the text observation (what a text-only planner trained here sees at run time), small objects with where they rest;
# "planner_names": the same with the visible names only (HomieBot-135M v0.3's data).
PROMPT_STYLES: tuple[str, ...] = ("release", "planner", "planner_names")
# "analysis": the paper's SFT answer (Analysis, Subtask, Model lines); "decision": Subtask and Model only, the shape
# of a DPO answer (a small planner then spends its training on the decision, and plans without writing an Analysis).
ANSWER_STYLES: tuple[str, ...] = ("analysis", "decision")


@dataclass(frozen=True)
class SftSample:
    """One supervised sample: the human turn and the answer of a successful step.

    Attributes:
        id: `<task_id>_<step>` (`<task_id>_r<k>_<step>` for the k-th rewrite).
        task_id: the task.
        variant: 0 for the original text, k for the k-th paraphrase.
        step: the step's number.
        human: the human turn (no image tokens).
        answer: the expected answer.
        images: the four observations (front, left, back, right).
    """

    id: str
    task_id: str
    variant: int
    step: int
    human: str
    answer: str
    images: tuple[Path, ...]


@dataclass(frozen=True)
class DpoRow:
    """One preference row.

    Attributes:
        id: `<sample id>_<kind>`.
        task_id: the task.
        kind: one of DPO_KINDS.
        prompt: the human turn of the step the pair is about.
        chosen: the preferred answer (no Analysis line).
        rejected: the dispreferred answer (no Analysis line).
    """

    id: str
    task_id: str
    kind: str
    prompt: str
    chosen: str
    rejected: str


def human_turn(trajectory: Trajectory, index: int) -> str:
    """The SFT human turn of the step at position `index` (0-based) of the trajectory."""
    earlier = trajectory.steps[:index]
    if earlier:
        history = "".join(f"({step.number}){step.decision} ({'success' if step.succeeded else 'fail'})\n"
                          for step in earlier)
        inventory, feedback = earlier[-1].inventory, earlier[-1].feedback
    else:
        history, inventory, feedback = f" {NO_VALUE}", NO_VALUE, NO_VALUE
    return (f"Task: {trajectory.task}\nInventory: {inventory}\nHistorical Execution:{history}\n"
            f"Feedback: {feedback}\n{SFT_REQUEST_LINE}")


def planner_turns(trajectory: Trajectory, locations: bool = True) -> list[str]:
    """The user message the run-time planner builds before each step, for prompt style "planner".

    The trajectory is replayed through the planner's own memory (history entries, feedback, inventory as the
    executor reported it) and `build_user_message` with the live request line, and every message starts with the
    text observation a text-only planner gets: the names visible per view when the step was planned (display
    names, from the collected visible.json), small objects with where they rested (locations.json; not with
    `locations` False, prompt style "planner_names", the planner's `object_locations=false`). Training on these is
    training on exactly what the planner shows.

    Raises:
        TrajectoryError: when the trajectory was collected without visible objects or their locations.
    """
    memory = PlannerMemory(trajectory.task)
    table = default_alias_table()
    turns = []
    for step in trajectory.steps:
        seen, rests = trajectory.visible(step), trajectory.locations(step) if locations else {}
        if seen is None or rests is None:
            raise TrajectoryError(f"{trajectory.source}: no visible.json and locations.json beside it: the planner "
                                  "prompt style needs the text observations `homiebot collect` records")
        shown = {view: shown_objects(names, rests.get(view, ()), lambda name: display_name(name, table))
                 for view, names in seen.items()}
        turns.append(build_user_message(memory.task, memory.inventory, memory.history, memory.feedback,
                                        visible=shown))
        inventory = [] if step.inventory in ("", NO_VALUE) else step.inventory.split(" ")
        memory.record_execution(step.number, parse_subtask(step.subtask), step.succeeded, step.feedback, inventory)
    return turns


def human_turns(trajectory: Trajectory, style: str = "release") -> list[str]:
    """The human turn of every step: the SFT data's layout ("release") or the run-time planner's ("planner").

    Raises:
        ValueError: for an unknown style.
    """
    if style == "release":
        return [human_turn(trajectory, index) for index in range(len(trajectory.steps))]
    if style in ("planner", "planner_names"):
        return planner_turns(trajectory, locations=style == "planner")
    raise ValueError(f"prompt style must be one of {', '.join(PROMPT_STYLES)}, not {style!r}")


def full_answer(step: TrajectoryStep) -> str:
    """`Analysis: ...\\nSubtask: [...]\\nModel: ...` (Model: None for End)."""
    return f"Analysis: {step.analysis}\n{short_answer(step.subtask, step.model)}"


def short_answer(subtask: str, model: str | None) -> str:
    """`Subtask: [...]\\nModel: ...`: a DPO answer (the full answer without its Analysis line)."""
    return f"Subtask: {subtask}\nModel: {model if model is not None else NO_VALUE}"


def sample_id(trajectory: Trajectory, step: TrajectoryStep, variant: int) -> str:
    """`<task_id>_<step>`, or `<task_id>_r<variant>_<step>` for a paraphrased variant."""
    tag = f"_r{variant}" if variant else ""
    return f"{trajectory.task_id}{tag}_{step.number}"


def sft_samples(trajectory: Trajectory, variant: int = 0, style: str = "release",
                answers: str = "analysis") -> list[SftSample]:
    """One sample per successful step (End included), in order; `style` picks the human-turn layout and `answers`
    the answer's shape (ANSWER_STYLES).

    Raises:
        ValueError: for an unknown answer style.
    """
    if answers not in ANSWER_STYLES:
        raise ValueError(f"answer style must be one of {', '.join(ANSWER_STYLES)}, not {answers!r}")
    turns = human_turns(trajectory, style)
    return [SftSample(id=sample_id(trajectory, step, variant), task_id=trajectory.task_id, variant=variant,
                      step=step.number, human=turns[index],
                      answer=full_answer(step) if answers == "analysis" else short_answer(step.subtask, step.model),
                      images=trajectory.images(step))
            for index, step in enumerate(trajectory.steps) if step.succeeded]


def dpo_rows(trajectory: Trajectory, variant: int = 0, style: str = "release") -> list[DpoRow]:
    """The natural pairs and the three constructed rows per successful non-End step, in step order."""
    steps = trajectory.steps
    turns = human_turns(trajectory, style)
    rows: list[DpoRow] = []
    for index, step in enumerate(steps):
        prompt = turns[index]
        base_id = sample_id(trajectory, step, variant)
        chosen = short_answer(step.subtask, step.model)
        if not step.succeeded:
            following = steps[index + 1] if index + 1 < len(steps) else None
            if following is not None and following.succeeded and not following.is_end:
                rows.append(DpoRow(f"{base_id}_natural", trajectory.task_id, "natural", prompt,
                                   short_answer(following.subtask, following.model), chosen))
            continue
        if step.is_end:
            continue
        next_success = next(later for later in steps[index + 1:] if later.succeeded)  # End always follows
        if step.model is None:  # read_trajectory never yields this; a hand-built Trajectory might
            raise ValueError(f"{trajectory.source}: block {step.number}: a successful {step.action} step names "
                             "no model")
        changed_action = format_subtask(ACTION_SWAP[step.action], step.target, step.place)
        rows.append(DpoRow(f"{base_id}_model", trajectory.task_id, "model", prompt, chosen,
                           short_answer(step.subtask, MODEL_SWAP[step.model])))
        rows.append(DpoRow(f"{base_id}_order", trajectory.task_id, "order", prompt, chosen,
                           short_answer(next_success.subtask, next_success.model)))
        rows.append(DpoRow(f"{base_id}_action", trajectory.task_id, "action", prompt, chosen, short_answer(changed_action, step.model)))
    return rows
