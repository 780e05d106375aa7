"""The task fuzzer's pure part: seeded tasks over the catalog's combinations, with their expert plans, and the report.

A *start place* is a (receptacle, region) where the apartment generator may put an object
(`habitat_bridge.placement.PLACEMENT_WEIGHTS`, every kitchen drawer on its own); a *destination* is a receptacle a
Put can name. Every object kind the alias table can name is combined with every start place it fits in (its height
within the region's clearance; a drawer takes tall objects only as a deep pot drawer), and the combinations are
dealt out in an order shuffled by the seed. Task `index` of seed `seed` takes combination `index` (modulo their
number) and draws the rest from its own generator (`random.Random(f"fuzz:{seed}:{index}")`): the task kind
(single-object fetch-and-place, a container task whose destination needs Open and Close, or a two-object task), the
destination (one the objects fit in), distractors, which doors and drawers start open and the apartment draw. So one
(seed, index) always gives the same task, alone or among others.

Each task is a definition mapping in the format of data/tasks/emmoe_train.yaml with an expert plan (Go to, Open
where closed, Pick, Go to, Put, Close, End), parsed by `homiebot.task_definitions`. `summarize` turns replayed
outcomes into the report: failure rates per (action, object, receptacle, region) and per cause, with the
(seed, index) of every failure.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from emmoe_core.names import default_alias_table
from emmoe_core.robot.layout import PUT_HEADROOM
from habitat_bridge import catalog, furniture
from habitat_bridge.placement import PLACEMENT_WEIGHTS

from homiebot.task_definitions import TaskDefinition, parse_definition

KINDS: tuple[str, ...] = ("fetch", "container", "two_objects")
# Chance that a door or drawer the plan does not need closed starts open; that the generator's counter has deep drawers.
OPEN_CHANCE = 0.25
DEEP_DRAWER_CHANCE = 0.3
MAX_DISTRACTORS = 2
_SHORT_TO_CANONICAL = {kind.short_name: kind.canonical for kind in catalog.FURNITURE_KINDS.values()}
# Furniture with several instances in every apartment: the expert walks to the object, not to the nearest one.
_SEVERAL = frozenset({"frl_apartment_chair_01"})
_DOORS = {"fridge": "fridge_0_door", "frl_apartment_wall_cabinet_02": "white_cabinet_0_door"}


@dataclass(frozen=True)
class Place:
    """Where an object starts or is put.

    Attributes:
        receptacle: canonical furniture name.
        region: the surface ("top", "shelf_0", "drawer_1"); "" for a destination (the Put skill picks it).
        name: what the expert calls it ("brown_table", "fridge", "drawer").
        container: the door or drawer instance closing it ("fridge_0_door", "kitchen_drawer_1"), "" for none;
            a drawer destination's is "drawer" (the skills pick one).
        clearance: the tallest object it takes (with deep drawers for a drawer).
        shallow: the tallest object a drawer takes without deep drawers (equal to clearance elsewhere).
    """

    receptacle: str
    region: str
    name: str
    container: str
    clearance: float
    shallow: float

    def fits(self, canonical: str) -> bool:
        """Whether an object of this kind fits (height within the clearance)."""
        return catalog.OBJECT_KINDS[canonical].size[2] <= self.clearance

    def needs_deep(self, canonical: str, headroom: float = 0.0) -> bool:
        """Whether this object (with `headroom` above it: a put's) fits only a deep pot drawer here."""
        return catalog.OBJECT_KINDS[canonical].size[2] + headroom > self.shallow


def _surfaces(canonical: str, model: str) -> dict[str, furniture.Surface]:
    """A furniture kind's support regions by name, built as `model` with every slot it offers."""
    kind = catalog.FURNITURE_KINDS[canonical]
    slots = furniture.available_slots(model, kind.size)
    return {surface.name: surface for surface in furniture.furniture_geometry(model, kind.size, slots).surfaces}


@functools.cache
def start_places() -> tuple[Place, ...]:
    """Every start place of the generator, each kitchen drawer separately, in a fixed order."""
    places = []
    for (short, region), weight in sorted(PLACEMENT_WEIGHTS.items()):
        canonical = _SHORT_TO_CANONICAL[short]
        surfaces = _surfaces(canonical, catalog.FURNITURE_KINDS[canonical].model)
        if weight <= 0:
            continue
        if region == "drawer":
            deep = _surfaces(canonical, "deep_counter")
            places += [Place(canonical, name, "drawer", f"kitchen_drawer_{name.split('_')[1]}", deep[name].clearance,
                             surface.clearance) for name, surface in sorted(surfaces.items()) if surface.part]
            continue
        surface = surfaces[region]
        places.append(Place(canonical, region, short, _DOORS.get(canonical, "") if surface.inside else "",
                            surface.clearance, surface.clearance))
    return tuple(places)


def destinations(starts: Sequence[Place]) -> tuple[Place, ...]:
    """The receptacles a Put names: each start place's furniture once (the kitchen drawers as "drawer"), less the
    white cabinet (whether a Put goes on top or inside is not defined) and the sink (the counter's region)."""
    found: dict[str, Place] = {}
    for place in starts:
        if place.receptacle == "frl_apartment_wall_cabinet_02" or place.region == "sink":
            continue
        key = "drawer" if place.name == "drawer" else place.receptacle
        container = "drawer" if place.name == "drawer" else place.container
        previous = found.get(key)
        clearance = max(place.clearance, previous.clearance if previous else 0.0)
        shallow = max(place.shallow, previous.shallow if previous else 0.0)
        found[key] = Place(place.receptacle, "drawer" if key == "drawer" else "", place.name, container, clearance,
                           shallow)
    return tuple(found[key] for key in sorted(found))


@functools.cache
def object_kinds() -> tuple[str, ...]:
    """Object kinds the expert can name (the alias table knows their short name)."""
    table = default_alias_table()
    return tuple(sorted(canonical for canonical, kind in catalog.OBJECT_KINDS.items() if table.knows(kind.short_name)))


@functools.cache
def combinations() -> tuple[tuple[str, Place], ...]:
    """Every (object kind, start place) the object fits in, in a fixed order."""
    return tuple((canonical, place) for canonical in object_kinds() for place in start_places() if place.fits(canonical))


@dataclass(frozen=True)
class StepKey:
    """What a step is about, for the report: (action, object, receptacle, region)."""

    action: str
    object: str
    receptacle: str
    region: str

    def label(self) -> str:
        """The report's name of the key, e.g. "Pick apple fridge/shelf_0"."""
        where = "/".join(part for part in (self.receptacle, self.region) if part)
        return " ".join(part for part in (self.action, self.object, where) if part)


@dataclass(frozen=True)
class FuzzTask:
    """One generated task.

    Attributes:
        seed: the fuzzer's seed.
        index: the task's number under that seed (seed and index reproduce it).
        kind: one of KINDS.
        definition: the parsed task definition (its seed is the apartment draw).
        mapping: the same definition as a YAML-ready mapping (data/tasks format).
        keys: what each expert step is about, aligned with `definition.expert`.
    """

    seed: int
    index: int
    kind: str
    definition: TaskDefinition
    mapping: dict[str, Any]
    keys: tuple[StepKey, ...]


def _short(canonical: str) -> str:
    return catalog.OBJECT_KINDS[canonical].short_name


class _Plan:
    """The expert steps of one task while they are written."""

    def __init__(self) -> None:
        self.steps: list[list[str]] = []
        self.keys: list[StepKey] = []

    def add(self, action: str, target: str, model: str, analysis: str, key: StepKey, place: str = "") -> None:
        subtask = f"[{action}, {target}, {place}]" if place else f"[{action}, {target}]" if target else f"[{action}]"
        self.steps.append([subtask, model, analysis])
        self.keys.append(key)


def _go_target(canonical: str, place: Place) -> tuple[str, str]:
    """Whom the expert walks to for an object at a start place, and with which model."""
    if place.receptacle in _SEVERAL:
        return _short(canonical), "PixNav"
    return place.name, "NoMaD"


def _key(action: str, canonical: str, place: Place) -> StepKey:
    return StepKey(action, _short(canonical) if canonical else "", place.receptacle, place.region)


def expert_plan(objects: Sequence[tuple[str, Place]], destination: Place, opened: Sequence[str]) -> _Plan:
    """Go to, Open where closed, Pick, Go to, Put for each object; then Close what the expert opened; End."""
    plan = _Plan()
    closing: list[Place] = []
    into = "in" if destination.container else "on"
    if destination.container and destination.container not in opened:
        plan.add("Go to", destination.name, "NoMaD", f"My hand is still free, so I open the {destination.name} "
                 f"first.", _key("Go to", "", destination))
        plan.add("Open", destination.name, "octo", f"I open the {destination.name}.", _key("Open", "", destination))
        closing.append(destination)
    done: set[str] = {destination.container}
    for canonical, place in objects:
        short = _short(canonical)
        target, model = _go_target(canonical, place)
        plan.add("Go to", target, model, f"The {short} is at the {place.name}; I go there.",
                 _key("Go to", canonical, place))
        if place.container and place.container not in opened and place.container not in done:
            plan.add("Open", place.name, "octo", f"The {short} is inside; I open the {place.name}.",
                     _key("Open", "", place))
            closing.append(place)
            done.add(place.container)
        plan.add("Pick", short, "RT-1-X", f"I pick the {short}.", _key("Pick", canonical, place))
        plan.add("Go to", destination.name, "NoMaD", f"I carry the {short} to the {destination.name}.",
                 _key("Go to", canonical, destination))
        plan.add("Put", short, "RT-1-X", f"I put the {short} {into} the {destination.name}.",
                 _key("Put", canonical, destination), destination.name)
    for number, place in enumerate(closing):
        if number or place is not destination:
            plan.add("Go to", place.name, "NoMaD", f"I go back to close the {place.name}.", _key("Go to", "", place))
        plan.add("Close", place.name, "octo", f"My hand is empty, so I close the {place.name}.",
                 _key("Close", "", place))
    plan.add("End", "", "None", "Everything is where the task wants it.", StepKey("End", "", "", ""))
    return plan


def _destination(rng: random.Random, kind: str, objects: Sequence[tuple[str, Place]],
                 choices: Sequence[Place]) -> Place | None:
    """A destination every object fits in, other than their receptacles (no drawer when one starts in a drawer):
    a container for a container task, an open surface for a fetch, either for two objects."""
    sources = {place.receptacle for _, place in objects if place.name != "drawer"}
    in_drawer = any(place.name == "drawer" for _, place in objects)
    fitting = [place for place in choices if all(place.fits(canonical) for canonical, _ in objects)
               and not (place.name == "drawer" and in_drawer)
               and (place.name == "drawer" or place.receptacle not in sources)
               and (kind == "two_objects" or bool(place.container) == (kind == "container"))]
    return rng.choice(fitting) if fitting else None


def generate_task(seed: int, index: int) -> FuzzTask:
    """Task `index` of seed `seed` (the same task whenever it is asked for)."""
    combos = list(combinations())
    random.Random(f"fuzz:{seed}").shuffle(combos)
    rng = random.Random(f"fuzz:{seed}:{index}")
    first = combos[index % len(combos)]
    kind = KINDS[rng.randrange(len(KINDS))]
    objects = [first]
    if kind == "two_objects":
        objects.append(rng.choice([combo for combo in combos if combo[0] != first[0]]))
    destination = _destination(rng, kind, objects, destinations(start_places()))
    if destination is None:
        kind, objects = "fetch", objects[:1]
        destination = _destination(rng, kind, objects, destinations(start_places()))
    if destination is None:
        raise ValueError(f"fuzz seed {seed} task {index}: no destination fits {first[0]}")
    drawers = {place.container for place in start_places() if place.name == "drawer"}
    starting_closed = {destination.container} | {place.container for _, place in objects} \
        if kind == "container" else set()
    if destination.container == "drawer":  # the generic drawer is never "opened": the plan opens one, all start shut
        starting_closed |= drawers
    doors = sorted(set(_DOORS.values()) | drawers)
    opened = [door for door in doors if door not in starting_closed and rng.random() < OPEN_CHANCE]
    taken = {canonical for canonical, _ in objects}
    open_places = [place for place in start_places() if not place.container]
    distractors = []
    for _ in range(rng.randrange(MAX_DISTRACTORS + 1)):
        canonical = rng.choice([name for name in object_kinds() if name not in taken])
        taken.add(canonical)
        distractors.append((canonical, rng.choice([place for place in open_places if place.fits(canonical)])))
    deep = any(place.name == "drawer" and place.needs_deep(canonical) for canonical, place in objects) or any(
        destination.name == "drawer" and destination.needs_deep(canonical, PUT_HEADROOM) for canonical, _ in objects)
    plan = expert_plan(objects, destination, opened)
    names = " and the ".join(_short(canonical) for canonical, _ in objects)
    mapping: dict[str, Any] = {
        "instruction": f"put the {names} {'in' if destination.container else 'on'} the {destination.name}",
        "seed": rng.randrange(1_000_000),
        "deep_drawers": deep or rng.random() < DEEP_DRAWER_CHANCE,
        "objects": [{"canonical": canonical, "receptacle": place.receptacle, "region": place.region}
                    for canonical, place in objects + distractors],
        "open": opened,
        "keypaths": [[step[0] for step in plan.steps]],
        "expert": plan.steps,
    }
    definition = parse_definition(index + 1, mapping, f"fuzz seed {seed}")
    return FuzzTask(seed, index, kind, definition, mapping, tuple(plan.keys))


def generate(count: int, seed: int) -> list[FuzzTask]:
    """Tasks 0 .. count-1 of a seed."""
    return [generate_task(seed, index) for index in range(count)]


_INSTANCE = re.compile(r"\b([a-z][a-z_]*?)_\d+\b")
_NUMBER = re.compile(r"\d+(\.\d+)?")
_ATTEMPTS = re.compile(r"^\d+ attempts? failed; last: ")


def cause_of(code: str, detail: str) -> str:
    """A failure's cause from the skill's own text: the last attempt's status and message ("grasp_failed: nothing
    within N m of the grasp point") or the detail's first clause, with instance numbers and figures taken out so
    that alike failures group ("D1: gelatin_box is N m away (limit N m)")."""
    last = _ATTEMPTS.sub("", detail.strip()).split(";")[0].strip()
    text = _NUMBER.sub("N", _INSTANCE.sub(r"\1", last))
    return f"{code or 'differs'}: {text}" if text else code or "differs"


@dataclass(frozen=True)
class StepOutcome:
    """A replayed step: what it was about, whether it went as designed, and the skill's words when not."""

    key: StepKey
    ok: bool
    code: str = ""
    detail: str = ""


@dataclass(frozen=True)
class TaskOutcome:
    """A replayed task: its steps up to the first one not as designed, or the reason it could not be set up."""

    seed: int
    index: int
    kind: str
    steps: tuple[StepOutcome, ...]
    setup_error: str = ""

    @property
    def ok(self) -> bool:
        """Whether every step went as designed."""
        return not self.setup_error and all(step.ok for step in self.steps)


def _rate(failed: int, total: int) -> dict[str, Any]:
    return {"failed": failed, "total": total, "rate": round(failed / total, 4) if total else 0.0}


def summarize(outcomes: Iterable[TaskOutcome]) -> dict[str, Any]:
    """The report: tasks as designed, failure rates per action and per (action, object, receptacle, region), and
    per cause with the (seed, index) that reproduce each failure."""
    done = sorted(outcomes, key=lambda outcome: outcome.index)
    per_action: dict[str, list[int]] = {}
    per_key: dict[str, list[int]] = {}
    causes: dict[str, list[dict[str, Any]]] = {}
    for outcome in done:
        if outcome.setup_error:
            causes.setdefault(f"setup {outcome.setup_error}", []).append(
                {"seed": outcome.seed, "index": outcome.index, "step": ""})
        for step in outcome.steps:
            for table, name in ((per_action, step.key.action), (per_key, step.key.label())):
                counts = table.setdefault(name, [0, 0])
                counts[0] += not step.ok
                counts[1] += 1
            if not step.ok:
                causes.setdefault(cause_of(step.code, step.detail), []).append(
                    {"seed": outcome.seed, "index": outcome.index, "step": step.key.label(), "detail": step.detail})
    failed = [outcome for outcome in done if not outcome.ok]
    return {
        "tasks": len(done),
        "as_designed": len(done) - len(failed),
        "per_kind": {kind: _rate(sum(not o.ok for o in done if o.kind == kind), sum(o.kind == kind for o in done))
                     for kind in KINDS},
        "per_action": {name: _rate(*counts) for name, counts in sorted(per_action.items())},
        "per_step": {name: _rate(*counts) for name, counts in sorted(per_key.items(), key=lambda item: (
            -item[1][0] / item[1][1], item[0]))},
        "causes": dict(sorted(causes.items(), key=lambda item: (-len(item[1]), item[0]))),
    }


def summary_lines(report: dict[str, Any], top: int = 10) -> list[str]:
    """A readable summary of a report."""
    lines = [f"{report['as_designed']} of {report['tasks']} fuzzed tasks as designed"]
    lines += [f"  {kind}: {entry['total'] - entry['failed']}/{entry['total']} as designed"
              for kind, entry in report["per_kind"].items() if entry["total"]]
    lines.append("failure rate per action (steps reached):")
    lines += [f"  {name:6} {100 * entry['rate']:5.1f} % ({entry['failed']}/{entry['total']})"
              for name, entry in report["per_action"].items()]
    failing = [(name, entry) for name, entry in report["per_step"].items() if entry["failed"]][:top]
    if failing:
        lines.append("worst (action, object, receptacle/region):")
        lines += [f"  {name}: {entry['failed']}/{entry['total']}" for name, entry in failing]
    if report["causes"]:
        lines.append("causes (seed:index reproduces):")
        for cause, cases in list(report["causes"].items())[:top]:
            where = ", ".join(f"{case['seed']}:{case['index']}" for case in cases[:6])
            lines.append(f"  {len(cases)} x {cause} [{where}{', ...' if len(cases) > 6 else ''}]")
    return lines
