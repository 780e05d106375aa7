"""EMMOE tasks for the embedded simulator: definitions (YAML) -> official-layout task folders.

Definition files (data/tasks/emmoe_train.yaml for tasks 1-90, data/tasks/emmoe_test.yaml for 91-100; parsed by
`homiebot.task_definitions`) list per task the instruction, the objects the scene must hold and where, the keypaths
and the expert trajectory. `build_tasks` validates them (names resolve through the alias table, every keypath ends
in [End], the expert's successful steps reach TP = 1 on the task's keypaths) and writes
`<data>/<split>/<id>/{scene.json,keypath.json,info.txt}`; tasks 1-90 go to train/, 91-100 to test/.
`build_variants` writes seeded variants of train tasks (another apartment draw with the same objects on the same
receptacles: different furniture placement, distractors and start pose) as `<data>/train/<id>_v<n>/`; test tasks
never get variants. Given a check (`homiebot tasks build --check-variants` replays the expert in the simulator), a
draw the check rejects is drawn again with another seed, and a variant no draw passes is left out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emmoe_eval.dataset import TEST_IDS, TRAIN_IDS, write_task
from emmoe_core.names import default_alias_table
from emmoe_core.protocol import SUCCESS_FEEDBACK

from homiebot.task_definitions import (
    TaskDefinition,
    TaskDefinitionError,
    load_all,
    load_definitions,
    parse_definition,
)

if TYPE_CHECKING:
    from habitat_bridge.scene_spec import SceneSpec

__all__ = ["DEFAULT_DEFINITIONS", "TEST_IDS", "TRAIN_IDS", "TaskDefinition", "TaskDefinitionError", "build_tasks",
           "build_variants", "expert_reaches_the_goal", "load_all", "load_definitions", "parse_definition",
           "scene_for", "split_of", "variant_id"]

DEFAULT_DEFINITIONS: tuple[Path, ...] = (Path("data/tasks/emmoe_train.yaml"), Path("data/tasks/emmoe_test.yaml"))


def split_of(task_id: int) -> str:
    """The EMMOE split of a task id: 1-90 train, 91-100 test."""
    if task_id in TRAIN_IDS:
        return "train"
    if task_id in TEST_IDS:
        return "test"
    raise TaskDefinitionError(f"task {task_id}: EMMOE task ids run from 1 to 100")


def variant_id(task_id: int, number: int) -> str:
    """Folder name of a task's variant: "12_v3"."""
    return f"{task_id}_v{number}"


# A check of a drawn variant: the problems found (empty when the draw is usable).
VariantCheck = Callable[[TaskDefinition, Mapping[str, Any]], Sequence[str]]
# Draws of one variant a check may reject before it is left out; redraw r adds r * REDRAW_STRIDE to the seed, which
# stays inside the seed's block of 1,000,000 and clear of every (task, number) pair for at most 9 redraws.
REDRAWS = 4
REDRAW_STRIDE = 100_000


def _variant_seed(task_id: int, number: int, seed: int, redraw: int = 0) -> int:
    return 1_000_000 * (seed + 1) + REDRAW_STRIDE * redraw + 1_000 * task_id + number


def scene_for(definition: TaskDefinition, seed: int | None = None) -> dict[str, Any]:
    """The task's apartment holding the definition's objects, as a scene-spec mapping.

    The apartment is drawn with `seed` (variants), else the definition's seed, else the task id. The generator adds random clutter after the
    required objects; the clutter kept is what cannot change the task: nothing inside a container, nothing of a kind
    the definition places itself, nothing of a `clear` kind or on `clear` furniture. Doors and drawers named in
    `open` start fully open.
    """
    from habitat_bridge.apartment import ApartmentConfig, generate_apartment
    from habitat_bridge.placement import ObjectRequest, PlacementRefused
    from habitat_bridge.scene_spec import SceneSpecError

    requests = tuple(ObjectRequest(item.canonical, item.receptacle, item.region) for item in definition.objects)
    draw = seed if seed is not None else definition.seed if definition.seed is not None else definition.task_id
    try:
        spec = generate_apartment(draw, ApartmentConfig(required=requests, deep_drawers=definition.deep_drawers))
    except PlacementRefused as error:
        raise TaskDefinitionError(f"task {definition.task_id}: a Fetch cannot do this task: {error}") from error
    except SceneSpecError as error:
        raise TaskDefinitionError(f"task {definition.task_id}: no scene for draw {draw}: {error}; name another seed "
                                  f"or fewer objects") from error
    _refuse_impossible_puts(definition, spec)
    furniture_kind = {piece.name: piece.canonical for piece in spec.furniture}
    for piece in spec.furniture:
        for articulation in piece.articulations:
            furniture_kind[articulation.name] = piece.canonical
    placed_kinds = {item.canonical for item in definition.objects}
    required, clutter = spec.objects[:len(requests)], spec.objects[len(requests):]
    kept = tuple(item for item in clutter
                 if not item.inside and item.canonical not in placed_kinds and item.canonical not in definition.clear
                 and furniture_kind.get(item.receptacle) not in definition.clear)
    names = {articulation.name for piece in spec.furniture for articulation in piece.articulations}
    unknown = sorted(set(definition.open) - names)
    if unknown:
        raise TaskDefinitionError(f"task {definition.task_id}: open: no door or drawer called {', '.join(unknown)}; "
                                  f"the scene has {', '.join(sorted(names))}")
    furniture = tuple(replace(piece, articulations=tuple(
        replace(part, initial=part.range[1]) if part.name in definition.open else part
        for part in piece.articulations)) for piece in spec.furniture)
    name = f"emmoe_task_{definition.task_id}" if seed is None else f"emmoe_task_{definition.task_id}_seed_{seed}"
    return replace(spec, name=name, furniture=furniture, objects=required + kept).to_dict()


def _refuse_impossible_puts(definition: TaskDefinition, spec: SceneSpec) -> None:
    """Raise when an expert Put names furniture that no region of takes its object (habitat_bridge.placement)."""
    from habitat_bridge.placement import put_refusal

    table = default_alias_table()
    for step in definition.expert:
        subtask = step.subtask
        if subtask.action != "Put" or not subtask.place:
            continue
        kinds = [item.canonical for item in definition.objects if table.matches(subtask.target, item.canonical)]
        why = put_refusal(spec, kinds[0], subtask.place) if kinds else ""
        if why:
            raise TaskDefinitionError(f"task {definition.task_id}: a Fetch cannot do this task: {why}")


def expert_reaches_the_goal(definition: TaskDefinition) -> bool:
    """Whether the expert trajectory's successful steps score TP = 1 on the definition's own keypaths."""
    from emmoe_eval.metrics import KeypathMatcher, NameIndex
    from emmoe_eval.runs import Step

    matcher = KeypathMatcher(str(definition.task_id), definition.keypaths, NameIndex(default_alias_table()))
    steps = [Step(step=index, action=step.subtask.action, target=step.subtask.target, place=step.subtask.place,
                  model=step.model, success=not step.expect, feedback=step.feedback)
             for index, step in enumerate(definition.expert, start=1)]
    return matcher.progress(steps) == 1.0


def _checked(definition: TaskDefinition) -> TaskDefinition:
    if not expert_reaches_the_goal(definition):
        raise TaskDefinitionError(f"task {definition.task_id}: the expert trajectory does not complete any keypath")
    for index, step in enumerate(definition.expert[:-1]):
        if step.expect and definition.expert[index + 1].subtask.action == "End":
            raise TaskDefinitionError(f"task {definition.task_id}: expert[{index}] is a designed failure; "
                                      f"a re-plan must follow it, not End")
    if not all(step.feedback != SUCCESS_FEEDBACK for step in definition.failures):
        raise TaskDefinitionError(f"task {definition.task_id}: a designed failure has no feedback")
    return definition


def build_tasks(definitions: Mapping[int, TaskDefinition], data_dir: Path | str,
                split: str | None = None) -> list[Path]:
    """Write every task folder into its split (1-90 train, 91-100 test); `split` keeps only that split's tasks.

    Raises:
        TaskDefinitionError: for an expert that does not complete its own keypaths, or a designed failure that is
            not followed by a re-plan.
    """
    written = []
    for task_id, definition in sorted(definitions.items()):
        task_split = split_of(task_id)
        if split is not None and split != task_split:
            continue
        _checked(definition)
        written.append(write_task(data_dir, task_split, str(task_id), definition.info(), definition.keypaths,
                                  scene=scene_for(definition)))
    return written


def build_variants(definitions: Mapping[int, TaskDefinition], data_dir: Path | str, count: int, seed: int = 0,
                   task_ids: Sequence[int] | None = None, check: VariantCheck | None = None,
                   redraws: int = REDRAWS) -> list[Path]:
    """Write `count` seeded variants of each selected train task as `<data>/train/<id>_v<n>/`.

    With `check`, each variant is the first of at most 1 + `redraws` draws that the check finds no problem in; a
    variant without one is not written (the returned folders say which were).

    Raises:
        TaskDefinitionError: when a selected task is a test task (test tasks never get variants), the count is
            negative or `redraws` is outside 0-9.
    """
    if not 0 <= redraws <= 9:
        raise TaskDefinitionError(f"variants: expected 0-9 redraws, got {redraws}")
    if count < 0:
        raise TaskDefinitionError(f"variants: expected a count >= 0, got {count}")
    chosen = sorted(definitions) if task_ids is None else sorted(task_ids)
    test_tasks = [task_id for task_id in chosen if split_of(task_id) == "test"]
    if task_ids is not None and test_tasks:
        raise TaskDefinitionError(f"tasks {', '.join(map(str, test_tasks))} are test tasks; test tasks never get "
                                  f"variants")
    written = []
    for task_id in chosen:
        if split_of(task_id) != "train":
            continue
        definition = _checked(definitions[task_id])
        for number in range(1, count + 1):
            scene = _drawn_variant(definition, task_id, number, seed, check, redraws)
            if scene is not None:
                written.append(write_task(data_dir, "train", variant_id(task_id, number), definition.info(),
                                          definition.keypaths, scene=scene))
    return written


def _drawn_variant(definition: TaskDefinition, task_id: int, number: int, seed: int, check: VariantCheck | None,
                   redraws: int) -> dict[str, Any] | None:
    """The scene of one variant: its first draw, or with `check` the first draw without problems (None: none)."""
    for redraw in range(1 + redraws if check is not None else 1):
        scene = scene_for(definition, _variant_seed(task_id, number, seed, redraw))
        if check is None or not check(definition, scene):
            return scene
    return None
