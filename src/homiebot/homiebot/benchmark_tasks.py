"""EMMOE tasks for the embedded simulator: definitions (YAML) -> official-layout task folders.

A definition file (data/tasks/emmoe_test.yaml) lists, per task id, the instruction, the objects the
scene must hold and where, the keypaths, and one expert trajectory. `build_tasks` validates it (the
names resolve through the alias table, every keypath ends in [End], the expert trajectory reaches
TP = 1 on its own keypaths) and writes `<data>/<split>/<id>/{scene.json,keypath.json,info.txt}`
with the simulator's apartment generator and emmoe_eval's writers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from emmoe_eval.dataset import InfoBlock, InfoTrajectory, Keypath, write_task
from emmoe_eval.names import default_alias_table
from emmoe_eval.protocol import ACTIONS, MODELS, SUCCESS_FEEDBACK, SubtaskText, parse_subtask

DEFAULT_DEFINITIONS = Path("data/tasks/emmoe_test.yaml")


class TaskDefinitionError(ValueError):
    """A task definition is invalid; the message names the file, the task and the field."""


@dataclass(frozen=True)
class PlacedObject:
    """An object the task's scene must contain: canonical name, starting furniture, optional counter part."""

    canonical: str
    receptacle: str
    region: str = ""


@dataclass(frozen=True)
class ExpertStep:
    """One step of the expert trajectory."""

    subtask: SubtaskText
    model: str
    analysis: str


@dataclass(frozen=True)
class TaskDefinition:
    """One simulator task.

    Attributes:
        task_id: EMMOE task id.
        instruction: the benchmark's instruction text.
        objects: objects the scene must contain.
        clear: canonical names of furniture that must hold no other object, and of objects that must not appear
            besides the listed ones (so "all items on the sofa" and "two kinds of fruit" mean what the keypaths say).
        keypaths: ways to complete the task, each ending in [End].
        expert: one successful trajectory (the info.txt content).
    """

    task_id: int
    instruction: str
    objects: tuple[PlacedObject, ...]
    clear: tuple[str, ...]
    keypaths: tuple[Keypath, ...]
    expert: tuple[ExpertStep, ...]

    def info(self) -> InfoTrajectory:
        """The expert trajectory as info.txt content, with the inventory after every step."""
        held: list[str] = []
        blocks = []
        for index, step in enumerate(self.expert, start=1):
            if step.subtask.action == "Pick":
                held.append(step.subtask.target)
            elif step.subtask.action == "Put" and step.subtask.target in held:
                held.remove(step.subtask.target)
            blocks.append(InfoBlock(index=index, subtask=step.subtask, model=step.model, analysis=step.analysis,
                                    feedback=SUCCESS_FEEDBACK, inventory=" ".join(held) or "None"))
        return InfoTrajectory(task=self.instruction, blocks=tuple(blocks))


def _fail(source: str, task: object, field: str, message: str) -> TaskDefinitionError:
    return TaskDefinitionError(f"{source}: task {task}: {field}: {message}")


def _subtask(text: Any, source: str, task: object, field: str) -> SubtaskText:
    if not isinstance(text, str):
        raise _fail(source, task, field, f"expected a subtask like '[Go to, fridge]', got {text!r}")
    try:
        subtask = parse_subtask(text)
    except ValueError as error:
        raise _fail(source, task, field, str(error)) from error
    if subtask.action not in ACTIONS:
        raise _fail(source, task, field, f"unknown action {subtask.action!r}; expected one of {', '.join(ACTIONS)}")
    table = default_alias_table()
    for name in (subtask.target, subtask.place):
        if name and not table.knows(name):
            raise _fail(source, task, field, f"{name!r} is not in the alias table")
    return subtask


def parse_definition(task_id: Any, data: Any, source: str) -> TaskDefinition:
    """Validate one task's mapping from the YAML file."""
    if not isinstance(task_id, int):
        raise TaskDefinitionError(f"{source}: task ids must be integers, got {task_id!r}")
    if not isinstance(data, Mapping):
        raise _fail(source, task_id, "definition", "expected a mapping")
    for key in ("instruction", "objects", "keypaths", "expert"):
        if key not in data:
            raise _fail(source, task_id, key, "missing")
    table = default_alias_table()
    objects = []
    for number, item in enumerate(data["objects"]):
        field = f"objects[{number}]"
        if not isinstance(item, Mapping) or "canonical" not in item or "receptacle" not in item:
            raise _fail(source, task_id, field, "expected {canonical, receptacle[, region]}")
        for key in ("canonical", "receptacle"):
            if item[key] not in table.aliases:
                raise _fail(source, task_id, f"{field}.{key}", f"{item[key]!r} is not a canonical alias-table entry")
        objects.append(PlacedObject(item["canonical"], item["receptacle"], item.get("region", "")))
    clear = tuple(data.get("clear", ()))
    for number, name in enumerate(clear):
        if name not in table.aliases:
            raise _fail(source, task_id, f"clear[{number}]", f"{name!r} is not a canonical alias-table entry")
    keypaths = []
    for number, path in enumerate(data["keypaths"]):
        nodes = tuple(_subtask(node, source, task_id, f"keypaths[{number}][{index}]")
                      for index, node in enumerate(path or []))
        if not nodes or nodes[-1].action != "End":
            raise _fail(source, task_id, f"keypaths[{number}]", "a keypath must end with [End]")
        keypaths.append(nodes)
    expert = []
    for number, step in enumerate(data["expert"]):
        field = f"expert[{number}]"
        if not isinstance(step, list) or len(step) != 3:
            raise _fail(source, task_id, field, "expected [subtask, model, analysis]")
        subtask = _subtask(step[0], source, task_id, field)
        model = "" if subtask.action == "End" else str(step[1])
        if subtask.action != "End" and model not in MODELS:
            raise _fail(source, task_id, field, f"unknown model {model!r}; expected one of {', '.join(MODELS)}")
        expert.append(ExpertStep(subtask, model, str(step[2])))
    if not expert or expert[-1].subtask.action != "End":
        raise _fail(source, task_id, "expert", "the expert trajectory must end with [End]")
    return TaskDefinition(task_id, str(data["instruction"]), tuple(objects), clear, tuple(keypaths),
                          tuple(expert))


def load_definitions(path: Path | str = DEFAULT_DEFINITIONS) -> dict[int, TaskDefinition]:
    """Read and validate a definition file."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise TaskDefinitionError(f"{path}: cannot read: {error.strerror}") from error
    except yaml.YAMLError as error:
        raise TaskDefinitionError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(raw, Mapping):
        raise TaskDefinitionError(f"{path}: expected a mapping of task id -> definition")
    return {task_id: parse_definition(task_id, data, str(path)) for task_id, data in raw.items()}


def scene_for(definition: TaskDefinition) -> dict[str, Any]:
    """The task's apartment (seeded by the task id) holding the definition's objects, as a scene-spec mapping.

    The generator adds random distractor objects after the required ones; those on `clear` furniture or of a
    `clear` kind are removed.
    """
    from dataclasses import replace

    from habitat_bridge.apartment import ApartmentConfig, ObjectRequest, generate_apartment

    requests = tuple(ObjectRequest(item.canonical, item.receptacle, item.region) for item in definition.objects)
    spec = generate_apartment(definition.task_id, ApartmentConfig(required=requests))
    furniture_kind = {piece.name: piece.canonical for piece in spec.furniture}
    for piece in spec.furniture:
        for articulation in piece.articulations:
            furniture_kind[articulation.name] = piece.canonical
    required, distractors = spec.objects[:len(requests)], spec.objects[len(requests):]
    kept = tuple(item for item in distractors
                 if item.canonical not in definition.clear and furniture_kind.get(item.receptacle) not in definition.clear)
    return replace(spec, name=f"emmoe_task_{definition.task_id}", objects=required + kept).to_dict()


def expert_reaches_the_goal(definition: TaskDefinition) -> bool:
    """Whether the expert trajectory scores TP = 1 on the definition's own keypaths."""
    from emmoe_eval.metrics import KeypathMatcher, NameIndex
    from emmoe_eval.runs import Step

    matcher = KeypathMatcher(str(definition.task_id), definition.keypaths, NameIndex(default_alias_table()))
    steps = [Step(step=index, action=step.subtask.action, target=step.subtask.target, place=step.subtask.place,
                  model=step.model, success=True, feedback=SUCCESS_FEEDBACK)
             for index, step in enumerate(definition.expert, start=1)]
    return matcher.progress(steps) == 1.0


def build_tasks(definitions: Mapping[int, TaskDefinition], data_dir: Path | str, split: str = "test") -> list[Path]:
    """Write every task folder; refuses definitions whose expert does not complete its own keypaths."""
    written = []
    for task_id, definition in sorted(definitions.items()):
        if not expert_reaches_the_goal(definition):
            raise TaskDefinitionError(f"task {task_id}: the expert trajectory does not complete any keypath")
        written.append(write_task(data_dir, split, str(task_id), definition.info(), definition.keypaths,
                                  scene=scene_for(definition)))
    return written
