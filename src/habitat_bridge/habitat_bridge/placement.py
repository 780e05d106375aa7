"""Where objects start in a generated apartment: the start places and their weights, the requests a task makes
("a cracker box in a kitchen drawer"), the refusal of a request no draw can satisfy (the object is too tall or too
wide for every region of the place), and the drawing of free spots on the chosen regions."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from emmoe_core.names import default_alias_table
from emmoe_core.robot.layout import PUT_HEADROOM
from emmoe_core.robot.naming import names_drawer

from habitat_bridge import catalog, layout
from habitat_bridge.scene_spec import SceneObject, SceneSpec, SceneSpecError

# Where objects may start: (furniture short name, surface) -> weight ("drawer": every drawer; the task fuzzer
# draws its start places from these too). Low shelves and fridge bottoms are left out:
# the arm cannot reach them well.
PLACEMENT_WEIGHTS: dict[tuple[str, str], float] = {
    ("kitchen_counter", "top"): 3.0, ("kitchen_counter", "sink"): 1.0, ("kitchen_counter", "drawer"): 1.5,
    ("fridge", "shelf_0"): 1.0, ("fridge", "shelf_1"): 1.0, ("brown_table", "top"): 2.5,
    ("wood_table", "top"): 2.0, ("white_desk", "top"): 1.5, ("tv_stand", "top"): 2.0, ("sofa", "seat"): 1.5,
    ("chair", "seat"): 0.5, ("white_shelf", "shelf_1"): 0.7, ("white_shelf", "shelf_2"): 0.7,
    ("white_cabinet", "top"): 0.8, ("white_cabinet", "shelf"): 0.8,
}
# Keep objects within this distance of the front edge of regions that are only reachable from the front.
FRONT_DEPTH = 0.4


@dataclass(frozen=True)
class ObjectRequest:
    """An object the generator must place.

    Attributes:
        canonical: the object's canonical name.
        receptacle: canonical name of the furniture it must start on or in ("" = anywhere).
        region: "drawer" for any drawer of the kitchen counter, or a support surface's own name ("sink", "drawer_1",
            "shelf_0", ...; "" = any region).
        exact: the object must start there (a task definition); False makes the place a preference that yields to
            any start place when the object cannot start there (places read from an instruction's words).
    """

    canonical: str
    receptacle: str = ""
    region: str = ""
    exact: bool = True


class PlacementRefused(SceneSpecError):
    """An object was asked for in a place where it cannot start at all (too tall or too wide for every region of
    it, or not a start place): no draw of the apartment can change that."""


def placement_regions(spec: SceneSpec) -> list[tuple[layout.WorldSurface, float]]:
    """Support regions objects may start on, with their weights."""
    regions = []
    for region in layout.world_surfaces(spec):
        kind = catalog.FURNITURE_KINDS[region.furniture.canonical]
        key = (kind.short_name, "drawer" if region.surface.part else region.surface.name)
        weight = PLACEMENT_WEIGHTS.get(key, 0.0)
        if weight > 0:
            regions.append((region, weight))
    return regions


def front_only(region: layout.WorldSurface) -> bool:
    """Regions reachable only from their front edge (everything but free-standing tables)."""
    return region.furniture.model not in ("table",) or region.surface.inside


def _requested_places(regions: list[tuple[layout.WorldSurface, float]], request: ObjectRequest,
                      ) -> list[tuple[layout.WorldSurface, float]]:
    """The start regions a request's receptacle and region name (every region without a receptacle)."""
    if not request.receptacle:
        return regions
    wanted = default_alias_table().canonicals(request.receptacle) | {request.receptacle}
    return [(region, weight) for region, weight in regions if region.furniture.canonical in wanted
            and (not request.region or request.region in (region.surface.name, "drawer"
                                                          if region.surface.part else region.surface.name))]


def _room_above(places: list[tuple[layout.WorldSurface, float]], height: float,
                ) -> list[tuple[layout.WorldSurface, float]]:
    """The places with at least `height` metres of free height above them."""
    return [(region, weight) for region, weight in places if region.surface.clearance >= height]


def refusal(request: ObjectRequest, places: list[tuple[layout.WorldSurface, float]]) -> str:
    """Why `request`'s object cannot start in any of `places` ('' when one takes it)."""
    place = f"{request.receptacle} {request.region}".strip()
    if not places:
        starts = sorted({f"{short} {surface}" for short, surface in PLACEMENT_WEIGHTS})
        return f"{request.canonical}: objects never start in {place}; start places are: {', '.join(starts)}"
    regions = [region for region, _ in places]
    hint = ("; deep_drawers: true gives the kitchen counter pot drawers"
            if any(region.surface.part for region in regions) else "")
    return _misfit(request.canonical, place, regions, 0.0, hint)


def _misfit(canonical: str, place: str, regions: Sequence[layout.WorldSurface], headroom: float, hint: str) -> str:
    """Why an object of kind `canonical` fits none of `regions` of `place` ('' when one takes it): too tall for all
    (with `headroom` above it; `hint` follows that message), or too wide for every one tall enough."""
    kind = catalog.OBJECT_KINDS[canonical]
    tall = [region for region in regions if region.surface.clearance >= kind.size[2] + headroom]
    if not tall:
        room = max(region.surface.clearance for region in regions)
        return f"{canonical} is {kind.size[2]:.2f} m tall and {place} has at most {room:.2f} m of room above its " \
               f"floor{hint}"
    radius = layout.footprint_radius(kind)
    if not any(min(region.half) >= radius for region in tall):
        return f"{canonical} needs a {2 * radius:.2f} m wide spot and {place} has none"
    return ""


def put_refusal(spec: SceneSpec, canonical: str, place: str) -> str:
    """Why no Fetch can put an object of kind `canonical` on or in the furniture `place` names: too tall for every
    region of it (with the put's headroom) or too wide for every one tall enough. '' when a region takes it, or when
    `place` names no furniture of the scene (an object, a room)."""
    wanted = default_alias_table().canonicals(place) | {place}
    regions = [region for region in layout.world_surfaces(spec) if region.furniture.canonical in wanted]
    if names_drawer(place):  # into the drawers, not onto the counter top
        regions = [region for region in regions if region.surface.part] or regions
    if not regions:
        return ""
    return _misfit(canonical, place, regions, PUT_HEADROOM, f" (a put needs {PUT_HEADROOM:.2f} m more than the "
                                                            f"object)")


def place_objects(base: SceneSpec, requests: Sequence[ObjectRequest], rng: random.Random,
                  new_name: Callable[[str], str]) -> list[SceneObject]:
    """Objects for the requests, each on a free spot drawn with `rng` and named by `new_name(stem)` (fewer objects
    than requests when a spot was not found).

    Raises:
        PlacementRefused: an exact request names a place its object cannot start in.
    """
    regions = placement_regions(base)
    taken: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    placed = []
    for request in requests:
        kind = catalog.OBJECT_KINDS[request.canonical]
        radius = layout.footprint_radius(kind)
        fitting = _room_above(regions, kind.size[2])
        if request.receptacle:
            places = _requested_places(regions, request)
            if request.exact:
                why = refusal(request, places)
                if why:
                    raise PlacementRefused(why)
            fitting = _room_above(places, kind.size[2]) or fitting
        for _ in range(20):
            region = rng.choices([item[0] for item in fitting], [item[1] for item in fitting])[0]
            key = (region.receptacle, region.surface.name)
            spot = layout.sample_spot(region, radius, taken.get(key, []), rng,
                                      FRONT_DEPTH if front_only(region) else None)
            if spot is not None:
                taken.setdefault(key, []).append((*spot, radius))
                placed.append(SceneObject(new_name(kind.short_name), request.canonical, kind.shape, kind.size,
                                          kind.color, kind.mass, region.receptacle, region.surface.name,
                                          region.surface.inside, spot, round(rng.uniform(-math.pi, math.pi), 4)))
                break
    return placed
