"""Seeded generator of ReplicaCAD-like apartments (living room, kitchen, dining area) with YCB-like objects.

`generate_apartment(seed)` lays out a 10 m x 7 m open-plan apartment: a kitchen with a counter (sink and drawers),
a fridge and a white cabinet; a dining area with the brown table, chairs and a white shelf; a living room with a
sofa, a wood coffee table, a tv stand with a wall-mounted TV, a white desk and a chair. The seed mirrors the plan,
moves furniture along its wall and picks and places the objects. Every object is placed within the robot's reach
from free floor connected to the robot's start (checked with habitat_bridge.occupancy; a draw that fails the check is
redrawn).

`compact_room(seed)` is a one-room kitchen (counter with two drawers, fridge, table, a few objects) that builds and
renders quickly, for tests.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Container, Sequence
from dataclasses import dataclass, field, replace

from emmoe_core.names import default_alias_table, normalize
from emmoe_core.robot import fetch

from habitat_bridge import catalog, furniture, layout, occupancy
from habitat_bridge.official import OfficialEpisode, receptacle_canonical
from habitat_bridge.placement import FRONT_DEPTH, ObjectRequest, front_only, place_objects
from habitat_bridge.scene_spec import (
    Articulation,
    Furniture,
    Pose2D,
    RobotStart,
    Room,
    SceneSpec,
    SceneSpecError,
    Wall,
)

WIDTH, DEPTH = 10.0, 7.0
WALL = 0.1
FLOOR_COLORS = {"living_room": (0.58, 0.45, 0.32), "kitchen": (0.7, 0.7, 0.66), "dining_area": (0.52, 0.4, 0.29)}
# The generator's free-floor checks (robot start, reachability) draw doors as covering squares (conservative: the
# floor just in front of a door stays clear too). Drawing them as their panels would change which draws pass, so
# every seeded apartment, and the task scenes built from them, would change.
GENERATOR_DOOR_FOOTPRINT = "covering_square"


@dataclass(frozen=True)
class ApartmentConfig:
    """Knobs of the generator.

    Attributes:
        min_objects: fewest objects to place.
        max_objects: most objects to place.
        required: objects placed in addition to the random draw (canonical names or ObjectRequests; repeats place
            several).
        attempts: layouts to try before giving up on reachability.
        deep_drawers: the kitchen counter has pot drawers (model "deep_counter") that take tall objects.
    """

    min_objects: int = 14
    max_objects: int = 20
    required: tuple[str | ObjectRequest, ...] = ()
    attempts: int = 20
    deep_drawers: bool = False

    def __post_init__(self) -> None:
        if not 0 <= self.min_objects <= self.max_objects:
            raise ValueError(f"need 0 <= min_objects <= max_objects, got {self.min_objects}, {self.max_objects}")
        requests = tuple(item if isinstance(item, ObjectRequest) else ObjectRequest(item) for item in self.required)
        object.__setattr__(self, "required", requests)
        unknown = [item.canonical for item in requests if item.canonical not in catalog.OBJECT_KINDS]
        if unknown:
            raise ValueError(f"required objects without a built-in shape: {', '.join(unknown)}; "
                             f"known: {', '.join(catalog.OBJECT_KINDS)}")
        if self.attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {self.attempts}")


@dataclass
class _Plan:
    """Mutable state while one layout is drawn."""

    rng: random.Random
    mirror_x: bool
    mirror_y: bool
    counters: dict[str, int] = field(default_factory=dict)
    furniture: list[Furniture] = field(default_factory=list)

    def name(self, stem: str) -> str:
        """The next free instance name for a stem ("chair" -> "chair_0", "chair_1", ...)."""
        index = self.counters.get(stem, 0)
        self.counters[stem] = index + 1
        return f"{stem}_{index}"

    def pose(self, x: float, y: float, yaw: float) -> Pose2D:
        """A template pose, mirrored as this plan says."""
        if self.mirror_x:
            x, yaw = WIDTH - x, -yaw
        if self.mirror_y:
            y, yaw = DEPTH - y, math.pi - yaw
        yaw = math.atan2(math.sin(yaw), math.cos(yaw))
        return Pose2D(round(x, 4), round(y, 4), round(yaw, 6))

    def bounds(self, xmin: float, ymin: float, xmax: float, ymax: float) -> tuple[float, float, float, float]:
        """Template room bounds, mirrored as this plan says."""
        if self.mirror_x:
            xmin, xmax = WIDTH - xmax, WIDTH - xmin
        if self.mirror_y:
            ymin, ymax = DEPTH - ymax, DEPTH - ymin
        return xmin, ymin, xmax, ymax

    def add(self, canonical: str, x: float, y: float, yaw: float, room: str, *, size: Sequence[float] | None = None,
            elevation: float = 0.0, slots: Sequence[str] = (), model: str = "") -> Furniture:
        """Add a piece of a catalogue kind at a template pose, with articulations for the given slots (`model`
        replaces the kind's geometry model)."""
        kind = catalog.FURNITURE_KINDS[canonical]
        name = self.name(kind.short_name)
        dimensions = tuple(size) if size is not None else kind.size
        articulations = []
        for slot in slots:
            defaults = furniture.slot_defaults(kind.model, slot)
            part_name = self.name("kitchen_drawer") if defaults.label == "drawer" else f"{name}_{defaults.label}"
            articulations.append(Articulation(part_name, slot, defaults.joint, (defaults.lower, defaults.upper),
                                              defaults.open_threshold, 0.0))
        piece = Furniture(name, canonical, model or kind.model, self.pose(x, y, yaw),
                          dimensions, kind.color, room, elevation, tuple(articulations))  # type: ignore[arg-type]
        self.furniture.append(piece)
        return piece


# Yaw that turns a piece's front (local -y) towards a direction.
FACING_SOUTH, FACING_NORTH, FACING_EAST, FACING_WEST = 0.0, math.pi, math.pi / 2, -math.pi / 2


def _rooms_and_walls(plan: _Plan) -> tuple[list[Room], list[Wall]]:
    split_x, split_y = 4.2, 3.6
    rooms = [
        Room("kitchen_0", "kitchen", plan.bounds(0.0, split_y, split_x, DEPTH), FLOOR_COLORS["kitchen"]),
        Room("dining_area_0", "dining_area", plan.bounds(0.0, 0.0, split_x, split_y), FLOOR_COLORS["dining_area"]),
        Room("living_room_0", "living_room", plan.bounds(split_x, 0.0, WIDTH, DEPTH), FLOOR_COLORS["living_room"],
             "living_room"),
    ]

    def point(x: float, y: float) -> tuple[float, float]:
        return (WIDTH - x if plan.mirror_x else x, DEPTH - y if plan.mirror_y else y)

    half = WALL / 2
    walls = [
        Wall(point(0.0, half), point(WIDTH, half)), Wall(point(0.0, DEPTH - half), point(WIDTH, DEPTH - half)),
        Wall(point(half, 0.0), point(half, DEPTH)), Wall(point(WIDTH - half, 0.0), point(WIDTH - half, DEPTH)),
        # A partial wall between the kitchen and the living room, and a short one beside the dining area.
        Wall(point(split_x, 5.1), point(split_x, DEPTH)), Wall(point(0.0, split_y), point(0.9, split_y)),
    ]
    return rooms, walls


def _furnish(plan: _Plan, deep_drawers: bool = False) -> None:
    rng = plan.rng
    # Kitchen: counter along the north wall, fridge at its east end, white cabinet on the west wall.
    counter = catalog.FURNITURE_KINDS["kitchen_counter"].size
    counter_x = 0.15 + counter[0] / 2 + rng.uniform(0.0, 0.15)
    plan.add("kitchen_counter", counter_x, DEPTH - WALL / 2 - counter[1] / 2 - 0.01, FACING_SOUTH, "kitchen_0",
             slots=furniture.drawer_slots(counter[0]), model="deep_counter" if deep_drawers else "")
    fridge = catalog.FURNITURE_KINDS["fridge"].size
    plan.add("fridge", counter_x + counter[0] / 2 + 0.08 + fridge[0] / 2, DEPTH - WALL / 2 - fridge[1] / 2 - 0.02,
             FACING_SOUTH, "kitchen_0", slots=("door",))
    cabinet = catalog.FURNITURE_KINDS["frl_apartment_wall_cabinet_02"].size
    plan.add("frl_apartment_wall_cabinet_02", WALL / 2 + cabinet[1] / 2 + 0.02 + 0.03, rng.uniform(4.3, 4.8),
             FACING_EAST, "kitchen_0", slots=("door",))
    # Dining area: brown table with a chair at each end, white shelf on the south wall.
    table = catalog.FURNITURE_KINDS["frl_apartment_table_01"].size
    table_x, table_y = rng.uniform(2.0, 2.4), rng.uniform(1.75, 2.05)
    plan.add("frl_apartment_table_01", table_x, table_y, 0.0, "dining_area_0")
    chair = catalog.FURNITURE_KINDS["frl_apartment_chair_01"].size
    gap = 0.12 + chair[1] / 2
    plan.add("frl_apartment_chair_01", table_x - table[0] / 2 - gap, table_y, FACING_EAST, "dining_area_0")
    plan.add("frl_apartment_chair_01", table_x + table[0] / 2 + gap, table_y, FACING_WEST, "dining_area_0")
    shelf = catalog.FURNITURE_KINDS["frl_apartment_wall_cabinet_01"].size
    plan.add("frl_apartment_wall_cabinet_01", rng.uniform(1.4, 2.8), WALL / 2 + shelf[1] / 2 + 0.02, FACING_NORTH,
             "dining_area_0")
    # Living room: tv stand and TV on the east wall, sofa facing them, coffee table between, desk on the north wall.
    stand = catalog.FURNITURE_KINDS["frl_apartment_tvstand"].size
    axis_y = rng.uniform(2.6, 3.4)
    stand_x = WIDTH - WALL / 2 - stand[1] / 2 - 0.02
    plan.add("frl_apartment_tvstand", stand_x, axis_y, FACING_WEST, "living_room_0")
    tv = catalog.FURNITURE_KINDS["frl_apartment_tv_screen"].size
    plan.add("frl_apartment_tv_screen", WIDTH - WALL / 2 - tv[1] / 2 - 0.01, axis_y, FACING_WEST, "living_room_0",
             elevation=1.0)
    sofa = catalog.FURNITURE_KINDS["frl_apartment_sofa"].size
    sofa_x = rng.uniform(5.55, 5.85)
    plan.add("frl_apartment_sofa", sofa_x, axis_y, FACING_EAST, "living_room_0")
    coffee = catalog.FURNITURE_KINDS["frl_apartment_table_02"].size
    plan.add("frl_apartment_table_02", sofa_x + sofa[1] / 2 + 0.95 + coffee[1] / 2, axis_y, FACING_EAST,
             "living_room_0")
    desk = catalog.FURNITURE_KINDS["frl_apartment_table_03"].size
    desk_x = rng.uniform(6.3, 7.6)
    plan.add("frl_apartment_table_03", desk_x, DEPTH - WALL / 2 - desk[1] / 2 - 0.02, FACING_SOUTH, "living_room_0")
    # The living-room chair stands beside the sofa, on the side away from the desk.
    plan.add("frl_apartment_chair_01", sofa_x, axis_y - sofa[0] / 2 - 0.45, FACING_NORTH, "living_room_0")


def _robot_start(plan: _Plan, spec: SceneSpec) -> RobotStart:
    """A free spot in the living room or kitchen, clear of furniture by 0.6 m where possible, facing roughly towards
    the middle of the apartment (so the front view looks into the room rather than at a wall)."""
    living = next(room for room in spec.rooms if room.kind == "living_room")
    kitchen = next(room for room in spec.rooms if room.kind == "kitchen")
    xmin, ymin, xmax, ymax = spec.bounds()
    middle = ((xmin + xmax) / 2, (ymin + ymax) / 2)
    base = occupancy.occupancy_grid(spec, 0.05, door_footprint=GENERATOR_DOOR_FOOTPRINT)
    for clearance in (0.6, fetch.ROBOT_RADIUS + 0.05):
        grid = base.inflated(clearance)
        for _ in range(200):
            room = living if plan.rng.random() < 0.6 else kitchen
            rx0, ry0, rx1, ry1 = room.bounds
            x, y = plan.rng.uniform(rx0, rx1), plan.rng.uniform(ry0, ry1)
            if grid.is_free(x, y):
                yaw = math.atan2(middle[1] - y, middle[0] - x) + plan.rng.uniform(-0.6, 0.6)
                return RobotStart(Pose2D(round(x, 3), round(y, 3), round(math.atan2(math.sin(yaw), math.cos(yaw)),
                                                                              4)))
    raise SceneSpecError("apartment: found no free spot for the robot")


def generate_apartment(seed: int, config: ApartmentConfig | None = None) -> SceneSpec:
    """A ReplicaCAD-like apartment; the same seed gives the same scene.

    Raises:
        PlacementRefused: a required object is asked for in a place it cannot start in.
        SceneSpecError: no layout with every object reachable was found in `config.attempts` draws.
    """
    config = config or ApartmentConfig()
    for attempt in range(config.attempts):
        rng = random.Random(f"apartment:{seed}:{attempt}")
        plan = _Plan(rng, mirror_x=rng.random() < 0.5, mirror_y=rng.random() < 0.5)
        rooms, walls = _rooms_and_walls(plan)
        _furnish(plan, config.deep_drawers)
        name = f"apartment_{seed}"
        bare = SceneSpec(name, seed, tuple(rooms), tuple(walls), tuple(plan.furniture), (),
                         RobotStart(Pose2D(*rooms[2].center, 0.0)))
        count = rng.randint(config.min_objects, config.max_objects)
        pool = sorted(catalog.OBJECT_KINDS)
        required = [item if isinstance(item, ObjectRequest) else ObjectRequest(item) for item in config.required]
        requests = required + [ObjectRequest(rng.choice(pool)) for _ in range(max(0, count - len(required)))]
        objects = place_objects(bare, requests, plan.rng, plan.name)
        if len(objects) < len(requests):
            continue
        spec = replace(bare, objects=tuple(objects))
        spec = replace(spec, robot=_robot_start(plan, spec))
        if not occupancy.unreachable_objects(spec, door_footprint=GENERATOR_DOOR_FOOTPRINT):
            return spec
    raise SceneSpecError(f"apartment: no layout for seed {seed} kept every object reachable in "
                         f"{config.attempts} attempts")


def compact_room(seed: int = 0, objects: Sequence[str] = ("013_apple", "024_bowl", "005_tomato_soup_can",
                                                           "003_cracker_box")) -> SceneSpec:
    """A small kitchen (5 m x 4 m): counter with two drawers, fridge, brown table and a few objects; for tests."""
    rng = random.Random(f"compact:{seed}")
    plan = _Plan(rng, mirror_x=False, mirror_y=False)
    width, depth = 5.0, 4.0
    room = Room("kitchen_0", "kitchen", (0.0, 0.0, width, depth), FLOOR_COLORS["kitchen"])
    half = WALL / 2
    walls = (Wall((0.0, half), (width, half)), Wall((0.0, depth - half), (width, depth - half)),
             Wall((half, 0.0), (half, depth)), Wall((width - half, 0.0), (width - half, depth)))
    counter_size = (2.3, 0.65, 0.9)
    plan.add("kitchen_counter", 0.2 + counter_size[0] / 2, depth - half - counter_size[1] / 2 - 0.01, FACING_SOUTH,
             "kitchen_0", size=counter_size, slots=furniture.drawer_slots(counter_size[0]))
    fridge = catalog.FURNITURE_KINDS["fridge"].size
    plan.add("fridge", 0.2 + counter_size[0] + 0.1 + fridge[0] / 2, depth - half - fridge[1] / 2 - 0.02,
             FACING_SOUTH, "kitchen_0", slots=("door",))
    plan.add("frl_apartment_table_01", 2.2, 1.3, 0.0, "kitchen_0")
    bare = SceneSpec(f"compact_{seed}", seed, (room,), walls, tuple(plan.furniture), (),
                     RobotStart(Pose2D(2.5, 2.3, math.pi / 2)))
    placed = place_objects(bare, [ObjectRequest(name) for name in objects], plan.rng, plan.name)
    if len(placed) < len(objects):
        raise SceneSpecError(f"compact room: could not place {len(objects)} objects")
    return replace(bare, objects=tuple(placed))


# ---- scenes for EMMOE tasks -----------------------------------------------------------------------------------------
_FRUIT = tuple(sorted(name for name, kind in catalog.OBJECT_KINDS.items() if kind.fruit))


# Words that say where an object is (not where it goes: "into", "to").
_PREPOSITIONS = {"on", "in", "from", "inside", "at"}
_ARTICLES = {"the", "a", "an"}
_CHILLED = {"cold", "frozen", "chilled", "refrigerated"}
# "clean up the sofa", "all items on the tv stand", "the fruit in the fridge": several objects start there.
_CLEAN = {"clean", "tidy"}
_COLLECTIVE = {"items", "everything", "things", "objects", "stuff", "food", "fruit", "fruits"}
# "place all items in the fridge" names a destination, unless a "to"/"into" follows ("put all items on the sofa
# to the tv stand").
_PLACING = {"put", "place", "move", "bring", "take", "carry"}
_TOWARDS = {"to", "into", "onto"}


def _phrases(words: Sequence[str], table_filter: Container[str]) -> list[tuple[int, int, list[str]]]:
    """(start, end, sorted canonicals) of the longest alias-table phrases whose canonicals are in `table_filter`."""
    table = default_alias_table()
    found = []
    used = [False] * len(words)
    for length in (3, 2, 1):
        for start in range(len(words) - length + 1):
            if any(used[start:start + length]):
                continue
            phrase = " ".join(words[start:start + length])
            candidates = sorted(name for name in table.canonicals(phrase) if name in table_filter)
            for suffix in ("s", "es"):  # plurals: "apples", "cracker boxes"
                if not candidates and phrase.endswith(suffix):
                    candidates = sorted(name for name in table.canonicals(phrase[: -len(suffix)])
                                        if name in table_filter)
            if candidates:
                found.append((start, start + length, candidates))
                used[start:start + length] = [True] * length
    return sorted(found)


def task_object_requests(instruction: str, rng: random.Random) -> list[ObjectRequest]:
    """The objects an instruction names (through the alias table), two of each, with where it says they are.

    "put the green_can on the brown_table ..." asks for potted meat cans, one of them on the brown table; "a cold
    apple" or "a frozen meat can" starts one in the fridge. Ambiguous names ("can", "box") pick one of their
    candidates with `rng`; "fruit" brings three fruits.
    """
    words = re.findall(r"[a-z0-9]+", normalize(instruction).replace("_", " "))
    objects = _phrases(words, catalog.OBJECT_KINDS)
    furniture_phrases = {start: (end, names) for start, end, names in _phrases(words, catalog.FURNITURE_KINDS)}
    requests: list[ObjectRequest] = []
    for start, end, candidates in objects:
        canonical = candidates[0] if len(candidates) == 1 else rng.choice(candidates)
        chilled = start > 0 and words[start - 1] in _CHILLED
        where = ObjectRequest(canonical, "fridge" if chilled else "", exact=False)
        position = end
        while position < len(words) and words[position] in _ARTICLES:
            position += 1
        if position < len(words) and words[position] in _PREPOSITIONS:
            position += 1
            while position < len(words) and words[position] in _ARTICLES:
                position += 1
            if position in furniture_phrases:
                phrase_end, names = furniture_phrases[position]
                phrase = words[position:phrase_end]
                region = "sink" if "sink" in phrase else "drawer" if "drawer" in phrase else ""
                where = ObjectRequest(canonical, names[0], region, exact=False)
        requests.extend([where, ObjectRequest(canonical)])
    for start, (end, names) in sorted(furniture_phrases.items()):
        kinds = _collection_before(words, start, end)
        if kinds:
            phrase = words[start:end]
            region = "sink" if "sink" in phrase else "drawer" if "drawer" in phrase else ""
            requests.extend(ObjectRequest(name, names[0], region, exact=False) for name in rng.sample(kinds, 3))
    if "fruit" in words:
        requests.extend(ObjectRequest(name) for name in rng.sample(_FRUIT, 3))
    return requests


def _collection_before(words: Sequence[str], start: int, end: int) -> tuple[str, ...]:
    """Object kinds an instruction implies lie on the furniture phrase words[start:end] ("clean up the sofa",
    "all items on the tv stand", "the fruit in the fridge"); empty when it implies none."""
    position = start - 1
    while position >= 0 and words[position] in _ARTICLES:
        position -= 1
    if position < 0:
        return ()
    before = set(words[max(0, position - 3): position])
    placing = bool(set(words[max(0, position - 5): position]) & _PLACING)
    if placing and not set(words[end:]) & _TOWARDS:
        return ()
    if words[position] in _PREPOSITIONS and before & _COLLECTIVE:
        if before & {"fruit", "fruits"}:
            return _FRUIT
        if "food" in before:
            return tuple(sorted(name for name, kind in catalog.OBJECT_KINDS.items() if kind.food))
        return tuple(sorted(catalog.OBJECT_KINDS))
    cleaning = words[position] in _CLEAN or (words[position] == "up" and position > 0
                                               and words[position - 1] in _CLEAN)
    return tuple(sorted(catalog.OBJECT_KINDS)) if cleaning else ()


def scene_for_task(task_id: int, instruction: str = "") -> SceneSpec:
    """The apartment for an EMMOE task: seeded by the task id, with the objects its instruction names."""
    required = task_object_requests(instruction, random.Random(f"task:{task_id}")) if instruction else []
    spec = generate_apartment(task_id, ApartmentConfig(required=tuple(required)))
    return replace(spec, name=f"task_{task_id}")


def spec_from_official(episode: OfficialEpisode, seed: int = 0) -> SceneSpec:
    """An apartment holding an official episode's YCB objects (what the embedded backend can reproduce of it).

    ReplicaCAD's furniture and the exact poses cannot be rebuilt here; the objects' kinds and counts are kept, and a
    target object starts on furniture of the same canonical kind as its official receptacle when the apartment has
    one and there is room on it (otherwise where the generator put it).
    """
    known = [obj.canonical for obj in episode.objects if obj.canonical in catalog.OBJECT_KINDS]
    spec = generate_apartment(seed, ApartmentConfig(min_objects=0, max_objects=0, required=tuple(known)))
    rng = random.Random(f"official:{episode.episode_id}:{seed}")
    regions = [region for region in layout.world_surfaces(spec)
               if not region.surface.inside and region.surface.part is None]
    objects = list(spec.objects)
    moved: set[int] = set()
    for target, (handle, _) in zip(episode.target_objects, episode.target_receptacles):
        index = next((i for i, obj in enumerate(objects) if obj.canonical == target.canonical and i not in moved),
                     None)
        if index is None:
            continue
        candidates = [region for region in regions if region.furniture.canonical == receptacle_canonical(handle)
                      and region.surface.clearance >= objects[index].size[2]]
        rng.shuffle(candidates)
        for region in candidates:
            taken = [(*obj.offset, layout.footprint_radius(obj)) for obj in objects
                     if obj.receptacle == region.receptacle and obj.surface == region.surface.name and obj.offset]
            spot = layout.sample_spot(region, layout.footprint_radius(objects[index]), taken, rng,
                                      FRONT_DEPTH if front_only(region) else None)
            if spot is not None:
                objects[index] = replace(objects[index], receptacle=region.receptacle, surface=region.surface.name,
                                         inside=False, offset=spot)
                moved.add(index)
                break
    return replace(spec, objects=tuple(objects), name=f"official_{episode.episode_id}")
