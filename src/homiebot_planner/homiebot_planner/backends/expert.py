"""The expert backend: replays a task's annotated plan (keypath.json, info.txt, or a plan given directly).

Used for data collection and as an upper bound. The expert follows one plan and answers every step with the
first plan node not yet done: a node counts as done when a *successful* executed step matched it, in order (the
greedy walk of EMMOE's task progress, computed by emmoe_eval.metrics). A failed step is retried, with two repairs
an annotator would make:
- after "the target is far away" (D1) it first goes to the target (Put: the place) again;
- when the next node is a Put of an object the robot no longer holds (e.g. it was dropped: E2), it redoes
  [Go to, object], [Pick, object] and [Go to, place] before the Put.
With several keypaths the expert follows the one with the most progress (the first on ties).
Source "replay" instead answers step n with block n of info.txt, designed failures included, whatever happened
(`homiebot collect` uses it to record what the annotated trajectory really does).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from emmoe_eval.dataset import DatasetError, InfoBlock, find_task, read_info, read_keypaths
from emmoe_eval.metrics import KeypathMatcher, NameIndex
from emmoe_core.names import AliasTable, default_alias_table
from emmoe_core.protocol import SubtaskText, default_model, parse_subtask
from emmoe_eval.runs import Step

from homiebot_planner.backends.base import BackendError, EpisodeInfo, GenerationRequest, HistorySource, PlannerBackend
from homiebot_planner.memory import ExecutedStep

EXPERT_SOURCES = ("keypath", "info", "plan", "replay")


@dataclass(frozen=True)
class PlanNode:
    """One step of the expert's plan: the subtask, the model to use, and the analysis to give."""

    subtask: SubtaskText
    model: str = ""
    analysis: str = ""


@dataclass(frozen=True)
class ExpertConfig:
    """Settings of the expert backend.

    Attributes:
        source: "keypath" (the task's keypath.json), "info" (the successful subtasks of its info.txt, with their
            models and analyses), "replay" (every block of its info.txt in order, failed ones included) or "plan"
            (the subtasks given in `plan`, for free instructions and tests).
        plan: bracketed subtasks for source "plan", e.g. ("[Go to, fridge]", "[Open, fridge]", "[End]").
        data_dir: the EMMOE data folder (holding train/ and test/) used when an episode names a task id but no
            task directory.
    """

    source: str = "info"
    plan: tuple[str, ...] = ()
    data_dir: str = ""

    def __post_init__(self) -> None:
        if self.source not in EXPERT_SOURCES:
            raise ValueError(f"expert source must be one of {', '.join(EXPERT_SOURCES)}, not {self.source!r}")
        if self.source == "plan":
            if not self.plan:
                raise ValueError("expert source 'plan' needs a non-empty plan (expert_plan)")
            for node in self.plan:
                try:
                    parse_subtask(node)
                except ValueError as error:
                    raise ValueError(f"expert_plan entry {node!r} is not a subtask: {error}") from None


def matched_nodes(plan: Sequence[PlanNode], executed: Sequence[ExecutedStep], names: NameIndex) -> int:
    """How many plan nodes the successful executed steps match, greedily and in order (TP x plan length)."""
    matcher = KeypathMatcher("expert plan", [tuple(node.subtask for node in plan)], names)
    steps = [Step(step=number, action=item.subtask.action, target=item.subtask.target, place=item.subtask.place,
                  success=item.success) for number, item in enumerate(executed, start=1)]
    return round(matcher.progress(steps) * len(plan))


def format_answer(node: PlanNode) -> str:
    """The three-line answer for a plan node."""
    model = node.model or "None"
    return f"Analysis: {node.analysis}\nSubtask: {node.subtask}\nModel: {model}"


class ExpertBackend(PlannerBackend):
    """Replays the expert plan of each episode (see the module docstring for how it follows the plan).

    Args:
        config: where the plans come from.
        alias_table: to compare names (the shipped table by default).
    """

    observation_mode = "images"
    needs_history = True

    def __init__(self, config: ExpertConfig | None = None, alias_table: AliasTable | None = None) -> None:
        self.config = config or ExpertConfig()
        self.name = f"expert:{self.config.source}"
        self._table = alias_table or default_alias_table()
        self._names = NameIndex(self._table)
        self._plans: tuple[tuple[PlanNode, ...], ...] = ()
        self._history: HistorySource = lambda: ()  # until a planner attaches its memory: nothing executed yet

    def attach_history(self, source: HistorySource) -> None:
        """Follow the plan along the steps `source` returns (the planner attaches its memory's)."""
        self._history = source

    def start_episode(self, episode: EpisodeInfo) -> None:
        """Load the plan(s) of the episode.

        Raises:
            BackendError: when the task's files are missing or malformed, or no task is known.
        """
        if self.config.source == "plan":
            nodes = tuple(parse_subtask(text) for text in self.config.plan)
            self._plans = (tuple(PlanNode(node, default_model(node, self._table), _analysis(i, len(nodes)))
                                 for i, node in enumerate(nodes)),)
            return
        directory = episode.task_dir
        try:
            if directory is None and episode.task_id and self.config.data_dir:
                task = find_task(self.config.data_dir, episode.task_id)
                directory = task.directory if task is not None else None
            if directory is None:
                raise BackendError(f"the expert ({self.config.source}) needs the task's directory: task "
                                   f"{episode.task_id or '(free instruction)'} was not found; set data_dir or use "
                                   "expert_source 'plan'")
            if self.config.source == "keypath":
                keypaths = read_keypaths(directory / "keypath.json")
                self._plans = tuple(tuple(PlanNode(node, default_model(node, self._table), _analysis(i, len(path)))
                                          for i, node in enumerate(path)) for path in keypaths)
            else:
                info = read_info(directory / "info.txt")
                blocks = [block for block in info.blocks if block.succeeded or self.config.source == "replay"]
                if not blocks or blocks[-1].subtask.action != "End":
                    blocks.append(InfoBlock(index=len(info.blocks) + 1, subtask=SubtaskText("End")))
                self._plans = (tuple(PlanNode(block.subtask, block.model or default_model(block.subtask, self._table),
                                              block.analysis or _analysis(i, len(blocks)))
                                     for i, block in enumerate(blocks)),)
        except DatasetError as error:
            raise BackendError(f"expert: {error}") from None

    def next_node(self, executed: Sequence[ExecutedStep], held: Sequence[str] = ()) -> PlanNode:
        """The node to answer with after the executed steps, given what the robot holds.

        Raises:
            BackendError: when no plan was loaded (start_episode not called).
        """
        node = self.planned_node(executed)
        if self.config.source == "replay":
            return node
        if node.subtask.action == "Put":
            repair = self._refetch(node, executed, held)
            if repair is not None:
                return repair
        last = executed[-1] if executed else None
        if (last is not None and not last.success and last.error == "D1"
                and _same_subtask(last.subtask, node.subtask, self._table)):
            return self._go_to(node.subtask.place or node.subtask.target, "it was too far away")
        return node

    def planned_node(self, executed: Sequence[ExecutedStep]) -> PlanNode:
        """The first node not yet done of the plan with the most progress (source "replay": block n for step n).

        Raises:
            BackendError: when no plan was loaded (start_episode not called).
        """
        if not self._plans:
            raise BackendError("expert: no plan loaded; start_episode must be called first")
        if self.config.source == "replay":
            return self._plans[0][min(len(executed), len(self._plans[0]) - 1)]
        matched = [matched_nodes(plan, executed, self._names) for plan in self._plans]
        best = max(range(len(self._plans)), key=lambda index: (matched[index] / len(self._plans[index]), -index))
        plan = self._plans[best]
        return plan[min(matched[best], len(plan) - 1)]

    def plan_complete(self, executed: Sequence[ExecutedStep]) -> bool:
        """Whether the successful executed steps match every node but the final End of some plan, in order."""
        return any(matched_nodes(plan, executed, self._names) >= len(plan) - (plan[-1].subtask.action == "End")
                   for plan in self._plans)

    @property
    def plans(self) -> tuple[tuple[PlanNode, ...], ...]:
        """The loaded plans (empty before start_episode)."""
        return self._plans

    def _refetch(self, put: PlanNode, executed: Sequence[ExecutedStep], held: Sequence[str]) -> PlanNode | None:
        """While the object of a Put is not held (or was dropped by the last failed Put, E2): the next of
        [Go to, object], [Pick, object], [Go to, place] not yet redone since that Put; None when nothing to redo."""
        thing, place = put.subtask.target, put.subtask.place
        failed_puts = [index for index, step in enumerate(executed) if step.subtask.action == "Put"
                       and not step.success and self._table.same(step.subtask.target, thing)]
        dropped = bool(failed_puts) and executed[failed_puts[-1]].error == "E2"
        if not dropped and any(self._table.same(thing, item) for item in held):
            return None
        repair = (SubtaskText("Go to", thing), SubtaskText("Pick", thing), SubtaskText("Go to", place))
        since = failed_puts[-1] + 1 if failed_puts else 0
        done = matched_nodes([PlanNode(node) for node in repair], executed[since:], self._names)
        if done >= len(repair):
            return None
        return PlanNode(repair[done], default_model(repair[done], self._table),
                        f"The {thing} is not in my hand any more, so I fetch it again before putting it on the {place}.")

    def _go_to(self, target: str, reason: str) -> PlanNode:
        subtask = SubtaskText("Go to", target)
        return PlanNode(subtask, default_model(subtask, self._table), f"I go to the {target} first: {reason}.")

    def generate(self, request: GenerationRequest) -> str:
        """The answer for the next plan node after the executed steps."""
        return format_answer(self.next_node(self._history(), request.constraints.held))


def _same_subtask(first: SubtaskText, second: SubtaskText, table: AliasTable) -> bool:
    return first.action == second.action and all(
        table.same(one, other) if one or other else True
        for one, other in ((first.target, second.target), (first.place, second.place)))


def _analysis(index: int, total: int) -> str:
    return f"Following the expert plan, step {index + 1} of {total}."
