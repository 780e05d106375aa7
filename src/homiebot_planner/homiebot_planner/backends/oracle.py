"""The re-planning expert (`backend oracle`): the next subtask of a shortest way to finish the task, from any state.

For training and evaluation only; it reads the scene's true state and is never a shipped planner. Where the replaying
expert (homiebot_planner.backends.expert) assumes that it made every earlier step itself, the oracle answers at states
another planner left behind (wrong object in hand, a door closed again, the robot walked off, an object dropped):

1. Which step of the task comes next: the first node of the task's annotated plan (its info.txt's successful
   subtasks) not yet matched, in order, by the successful executed steps (the greedy walk of EMMOE's task progress).
   When that plan is done but no keypath is complete (another planner's steps matched it differently), the next node
   of the keypath with the most progress. End only when a keypath is complete.
2. What that node needs first, read from the scene (the privileged snapshot the executor's checks read too):
   - an empty hand for Pick, Open and Close (L1): a held object is put down on the nearest free furniture (walked up
     to when out of reach), and picked again where the plan needs it;
   - the object in hand for Put (L2): fetched again (Pick with its own needs);
   - an open door or drawer to put into or to pick out of (L3): opened first, with an empty hand;
   - the target within the D1 limit (2 m): walked up to first, through the plan's own Go to of that place when it
     has one, else by the target's name.
   A failed step is simply asked again: the scene says what changed.

The scene comes from a callable attached per run (`attach_scene`); the planner node attaches its /sim/query_scene
client, tests a fake snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from emmoe_core.names import AliasTable, default_alias_table
from emmoe_core.protocol import ACTIONS, SubtaskText, default_model
from emmoe_core.robot.naming import FAR_THRESHOLD_M, NameResolver, ResolvedTarget
from emmoe_core.robot.scene import SceneSnapshot
from emmoe_core.robot.state import ContainerState, InstanceState
from emmoe_core.validation import require_positive

from homiebot_planner.backends.base import BackendError, EpisodeInfo, GenerationRequest, HistorySource, PlannerBackend
from homiebot_planner.backends.expert import ExpertBackend, ExpertConfig, PlanNode, format_answer
from homiebot_planner.memory import ExecutedStep
from homiebot_planner.prompts import display_name

SceneSource = Callable[[], SceneSnapshot]
# How often a put-down on one piece of furniture may fail before the oracle tries the next nearest.
PUT_DOWN_ATTEMPTS = 2


@dataclass(frozen=True)
class OracleConfig:
    """Settings of the re-planning expert.

    Attributes:
        data_dir: the EMMOE data folder (train/ and test/) to find a task's info.txt and keypath.json by id.
        reach_m: targets farther than this (planar, metres) are walked up to first: the D1 limit of the checks.
    """

    data_dir: str = ""
    reach_m: float = FAR_THRESHOLD_M

    def __post_init__(self) -> None:
        require_positive("oracle reach_m", self.reach_m)


class OracleBackend(PlannerBackend):
    """Answers every step with the first subtask of a shortest completion from the current state (module docstring).

    Args:
        config: where the tasks are and the reach limit.
        alias_table: to compare and resolve names (the shipped table by default).
    """

    observation_mode = "images"
    needs_scene = True
    needs_history = True

    def __init__(self, config: OracleConfig | None = None, alias_table: AliasTable | None = None) -> None:
        self.config = config or OracleConfig()
        self.name = "oracle"
        self._table = alias_table or default_alias_table()
        self._resolver = NameResolver(self._table)
        self._plan = ExpertBackend(ExpertConfig(source="info", data_dir=self.config.data_dir), self._table)
        self._keypaths = ExpertBackend(ExpertConfig(source="keypath", data_dir=self.config.data_dir), self._table)
        self._started = False
        self._scene: SceneSource | None = None
        self._history: HistorySource = lambda: ()  # until a planner attaches its memory: nothing executed yet

    def attach_scene(self, source: SceneSource) -> None:
        """Read the scene through `source` from now on (the planner node attaches its /sim/query_scene client)."""
        self._scene = source

    def attach_history(self, source: HistorySource) -> None:
        """Read the executed steps through `source` (the planner attaches its memory's)."""
        self._history = source

    def start_episode(self, episode: EpisodeInfo) -> None:
        """Load the task's plan (info.txt) and keypaths.

        Raises:
            BackendError: for a free instruction or a task whose files are missing.
        """
        self._plan.start_episode(episode)
        self._keypaths.start_episode(episode)
        self._started = True

    def generate(self, request: GenerationRequest) -> str:
        """The three-line answer for the next subtask (reads the scene once).

        Raises:
            BackendError: when no scene source is attached.
        """
        if self._scene is None:
            raise BackendError("oracle: no scene source attached (the planner node attaches /sim/query_scene)")
        return format_answer(self.next_node(self._history(), self._scene(), request.constraints.held))

    def next_node(self, executed: Sequence[ExecutedStep], scene: SceneSnapshot, held: Sequence[str] = ()) -> PlanNode:
        """The next subtask from the state `scene` after `executed` (see the module docstring).

        Raises:
            BackendError: when start_episode was not called.
        """
        if not self._started:
            raise BackendError("oracle: start_episode must be called first")
        node = self._plan.planned_node(executed)
        if node.subtask.action == "End" and not self._keypaths.plan_complete(executed):
            node = self._keypaths.planned_node(executed)
        if node.subtask.action == "End":
            return node
        state = _State(scene, executed, tuple(held))
        subtask = self._first_step(node.subtask, state)
        if subtask == node.subtask:
            return node
        return PlanNode(subtask, default_model(subtask, self._table), _reason(node.subtask, subtask))

    # ---- what a node needs first ----------------------------------------------------------------------------------

    def _first_step(self, node: SubtaskText, state: _State) -> SubtaskText:
        action = node.action
        if action == "Go to":
            return node
        if action == "Pick":
            return self._pick(node, state)
        if action == "Put":
            return self._put(node, state)
        if state.scene.held_object:
            return self._put_down(state, avoid="")
        return self._within_reach(node, self._resolver.resolve(node.target, state.scene, action.lower()), state)

    def _pick(self, node: SubtaskText, state: _State) -> SubtaskText:
        if state.scene.held_object:
            return self._put_down(state, avoid="")
        target = self._resolver.resolve(node.target, state.scene, "pick")
        if target is None:
            return node
        closed = _closed_part_around(target.instance, state.scene)
        if closed is not None:
            return self._open(closed, state)
        return self._within_reach(node, target, state, approach=target.instance)

    def _put(self, node: SubtaskText, state: _State) -> SubtaskText:
        scene = state.scene
        place = self._resolver.resolve(node.place, scene, "put")
        if place is not None and place.put_needs_opening():
            if scene.held_object:
                return self._put_down(state, avoid=place.instance.name)
            assert place.container is not None
            return self._open(place.container, state, written=node.place)
        if not self._table.matches(node.target, scene.held_canonical()):
            if scene.held_object:
                return self._put_down(state, avoid="")
            return self._pick(SubtaskText("Pick", node.target), state)
        return self._within_reach(node, place, state)

    def _open(self, part: ContainerState, state: _State, written: str = "") -> SubtaskText:
        """Open `part` (walking up first): named as the plan names it when the plan opens it, else by its kind."""
        name = written or self._plan_name(state.scene, ("Open",), "open", lambda resolved: (
            resolved.container is not None and resolved.container.name == part.name)) or (
            "drawer" if part.is_drawer else display_name(part.canonical, self._table))
        opening = SubtaskText("Open", name)
        return self._within_reach(opening, self._resolver.resolve(name, state.scene, "open"), state)

    def _within_reach(self, node: SubtaskText, target: ResolvedTarget | None, state: _State,
                      approach: InstanceState | None = None) -> SubtaskText:
        """`node` when its target is within reach (or unknown: the executor answers), else the Go to before it."""
        if target is None or target.distance <= self.config.reach_m:
            return node
        return SubtaskText("Go to", self._approach_name(node, target, state.scene, approach))

    def _approach_name(self, node: SubtaskText, target: ResolvedTarget, scene: SceneSnapshot,
                       item: InstanceState | None) -> str:
        """Where to walk for `node`: the plan's Go to that reaches the target's furniture, else the name written."""
        goal = target.instance.name
        if item is not None and item.receptacle:
            part = scene.container(item.receptacle)
            goal = part.furniture if part is not None else item.receptacle
        return self._plan_name(scene, ("Go to",), "go to", lambda reached: reached.instance.name == goal) or (
            node.place if node.action == "Put" else node.target)

    def _plan_name(self, scene: SceneSnapshot, actions: tuple[str, ...], verb: str,
                   wanted: Callable[[ResolvedTarget], bool]) -> str:
        """The first name the plan's `actions` nodes write (target or place) that resolves, for `verb`, to what
        `wanted` accepts; "" when none does."""
        for plan_node in self._plan.plans[0] if self._plan.plans else ():
            if plan_node.subtask.action not in actions:
                continue
            for name in (plan_node.subtask.target, plan_node.subtask.place):
                resolved = self._resolver.resolve(name, scene, verb) if name else None
                if resolved is not None and wanted(resolved):
                    return name
        return ""

    def _put_down(self, state: _State, avoid: str) -> SubtaskText:
        """Put the held object on the nearest furniture that takes it (walking up first when out of reach)."""
        scene = state.scene
        thing = (state.held[0] if state.held else "") or display_name(scene.held_canonical(), self._table) \
            or scene.held_object
        candidates = (item for item in scene.objects if item.kind in ("furniture", "container") and item.name != avoid)
        for furniture in sorted(candidates, key=lambda item: (item.distance, item.name)):
            name = self._plan_name(scene, ACTIONS, "go to", lambda found: found.instance.name == furniture.name) \
                or display_name(furniture.canonical, self._table)
            resolved = self._resolver.resolve(name, scene, "put")
            if resolved is None or resolved.instance.name != furniture.name or resolved.put_needs_opening():
                continue
            if state.failed_puts(name, self._table) >= PUT_DOWN_ATTEMPTS:
                continue
            if resolved.distance > self.config.reach_m:
                return SubtaskText("Go to", name)
            return SubtaskText("Put", thing, name)
        raise BackendError(f"oracle: no furniture in the scene takes the {thing} in hand")


@dataclass(frozen=True)
class _State:
    """What one answer is computed from."""

    scene: SceneSnapshot
    executed: Sequence[ExecutedStep]
    held: tuple[str, ...]

    def failed_puts(self, place: str, table: AliasTable) -> int:
        """Failed Puts onto `place` since the last successful step."""
        count = 0
        for step in reversed(self.executed):
            if step.success:
                break
            if step.subtask.action == "Put" and table.same(step.subtask.place, place):
                count += 1
        return count


def _closed_part_around(item: InstanceState, scene: SceneSnapshot) -> ContainerState | None:
    """The closed door or drawer an object lies behind, if any."""
    if not item.inside or not item.receptacle:
        return None
    part = scene.container(item.receptacle)
    if part is not None:
        return None if part.is_open else part
    doors = [door for door in scene.containers_of(item.receptacle) if not door.is_drawer]
    return next((door for door in doors if not door.is_open), None)


def _reason(node: SubtaskText, first: SubtaskText) -> str:
    return f"Before {node} I need {first}."
