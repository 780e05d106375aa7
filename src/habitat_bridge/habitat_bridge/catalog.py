"""What the embedded apartment is made of: YCB-like objects and ReplicaCAD-like furniture, by canonical name.

Canonical names are the entries of the EMMOE alias table (`emmoe_core.names`). Object sizes are the real YCB object
dimensions in metres (bounding box: length x width x height, standing upright); colours are the objects' dominant
colours, which the alias table's colour words refer to ("blue can" is the master chef can, "red box" the cracker box,
"green can" the potted meat can). Furniture sizes are typical ReplicaCAD apartment sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

# Shapes the MJCF builder knows how to make from primitives.
OBJECT_SHAPES: tuple[str, ...] = ("box", "cylinder", "sphere", "ellipsoid", "banana", "bowl", "mug")


@dataclass(frozen=True)
class ObjectKind:
    """One YCB object type.

    Attributes:
        canonical: alias-table entry, e.g. "013_apple".
        short_name: readable stem for instance names ("apple" -> "apple_0").
        shape: one of OBJECT_SHAPES.
        size: bounding box (x, y, z) in metres, z up.
        color: RGB in [0, 1].
        mass: kilograms.
        food: whether the object is food (tasks ask for "food" and "fruit").
        fruit: whether the object is a fruit.
    """

    canonical: str
    short_name: str
    shape: str
    size: tuple[float, float, float]
    color: tuple[float, float, float]
    mass: float
    food: bool = False
    fruit: bool = False


OBJECT_KINDS: dict[str, ObjectKind] = {kind.canonical: kind for kind in (
    ObjectKind("002_master_chef_can", "master_chef_can", "cylinder", (0.102, 0.102, 0.139), (0.12, 0.33, 0.75), 0.41,
               food=True),
    ObjectKind("003_cracker_box", "cracker_box", "box", (0.16, 0.06, 0.21), (0.82, 0.12, 0.1), 0.41, food=True),
    ObjectKind("004_sugar_box", "sugar_box", "box", (0.09, 0.038, 0.175), (0.95, 0.85, 0.2), 0.51, food=True),
    ObjectKind("005_tomato_soup_can", "tomato_soup_can", "cylinder", (0.066, 0.066, 0.101), (0.85, 0.18, 0.12),
               0.35, food=True),
    ObjectKind("006_mustard_bottle", "mustard_bottle", "box", (0.095, 0.058, 0.19), (0.98, 0.85, 0.05), 0.6,
               food=True),
    ObjectKind("007_tuna_fish_can", "tuna_fish_can", "cylinder", (0.085, 0.085, 0.033), (0.75, 0.72, 0.55), 0.17,
               food=True),
    ObjectKind("008_pudding_box", "pudding_box", "box", (0.11, 0.089, 0.035), (0.55, 0.35, 0.2), 0.19, food=True),
    ObjectKind("009_gelatin_box", "gelatin_box", "box", (0.089, 0.073, 0.028), (0.85, 0.2, 0.35), 0.1, food=True),
    ObjectKind("010_potted_meat_can", "potted_meat_can", "box", (0.101, 0.051, 0.083), (0.2, 0.6, 0.3), 0.37,
               food=True),
    ObjectKind("011_banana", "banana", "banana", (0.19, 0.04, 0.036), (0.98, 0.86, 0.25), 0.07, food=True,
               fruit=True),
    ObjectKind("012_strawberry", "strawberry", "ellipsoid", (0.044, 0.044, 0.05), (0.85, 0.08, 0.12), 0.02,
               food=True, fruit=True),
    ObjectKind("013_apple", "apple", "sphere", (0.075, 0.075, 0.075), (0.8, 0.1, 0.1), 0.07, food=True, fruit=True),
    ObjectKind("014_lemon", "lemon", "ellipsoid", (0.068, 0.054, 0.054), (0.98, 0.92, 0.2), 0.03, food=True,
               fruit=True),
    ObjectKind("015_peach", "peach", "sphere", (0.059, 0.059, 0.059), (0.98, 0.62, 0.38), 0.03, food=True,
               fruit=True),
    ObjectKind("016_pear", "pear", "ellipsoid", (0.066, 0.066, 0.1), (0.7, 0.8, 0.25), 0.05, food=True, fruit=True),
    ObjectKind("017_orange", "orange", "sphere", (0.073, 0.073, 0.073), (0.98, 0.55, 0.08), 0.05, food=True,
               fruit=True),
    ObjectKind("018_plum", "plum", "sphere", (0.052, 0.052, 0.052), (0.45, 0.1, 0.4), 0.03, food=True, fruit=True),
    ObjectKind("021_bleach_cleanser", "bleach_cleanser", "box", (0.098, 0.065, 0.25), (0.92, 0.92, 0.95), 1.13),
    ObjectKind("024_bowl", "bowl", "bowl", (0.159, 0.159, 0.053), (0.8, 0.15, 0.12), 0.15),
    ObjectKind("025_mug", "mug", "mug", (0.117, 0.093, 0.081), (0.75, 0.2, 0.15), 0.12),
    ObjectKind("026_sponge", "sponge", "box", (0.114, 0.072, 0.014), (0.35, 0.7, 0.3), 0.01),
)}


# Furniture models the geometry module knows (see habitat_bridge.furniture).
FURNITURE_MODELS: tuple[str, ...] = (
    "table", "desk", "sofa", "chair", "tv_stand", "tv", "counter", "deep_counter", "fridge", "cabinet", "shelf",
)


@dataclass(frozen=True)
class FurnitureKind:
    """One ReplicaCAD-like piece of furniture.

    Attributes:
        canonical: alias-table entry, e.g. "frl_apartment_table_01".
        short_name: readable stem for instance names ("brown_table" -> "brown_table_0").
        model: geometry template, one of FURNITURE_MODELS.
        size: default (length, depth, height) in metres.
        color: RGB in [0, 1].
    """

    canonical: str
    short_name: str
    model: str
    size: tuple[float, float, float]
    color: tuple[float, float, float]


FURNITURE_KINDS: dict[str, FurnitureKind] = {kind.canonical: kind for kind in (
    FurnitureKind("frl_apartment_sofa", "sofa", "sofa", (2.1, 0.9, 0.85), (0.22, 0.33, 0.62)),
    FurnitureKind("frl_apartment_table_01", "brown_table", "table", (1.4, 0.85, 0.76), (0.42, 0.27, 0.15)),
    FurnitureKind("frl_apartment_table_02", "wood_table", "table", (1.1, 0.6, 0.5), (0.86, 0.73, 0.45)),
    FurnitureKind("frl_apartment_table_03", "white_desk", "desk", (1.2, 0.6, 0.75), (0.93, 0.93, 0.91)),
    FurnitureKind("frl_apartment_tvstand", "tv_stand", "tv_stand", (1.6, 0.45, 0.5), (0.22, 0.42, 0.72)),
    FurnitureKind("frl_apartment_tv_screen", "tv", "tv", (1.2, 0.06, 0.7), (0.05, 0.05, 0.06)),
    FurnitureKind("frl_apartment_chair_01", "chair", "chair", (0.48, 0.5, 0.9), (0.55, 0.38, 0.25)),
    FurnitureKind("frl_apartment_wall_cabinet_01", "white_shelf", "shelf", (0.8, 0.35, 1.2), (0.95, 0.95, 0.95)),
    FurnitureKind("frl_apartment_wall_cabinet_02", "white_cabinet", "cabinet", (0.9, 0.45, 0.9),
                  (0.96, 0.96, 0.96)),
    FurnitureKind("kitchen_counter", "kitchen_counter", "counter", (3.0, 0.65, 0.9), (0.78, 0.78, 0.76)),
    FurnitureKind("fridge", "fridge", "fridge", (0.8, 0.72, 1.8), (0.86, 0.88, 0.9)),
)}
