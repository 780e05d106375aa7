"""Collision-free paths in joint space: RRT-Connect with shortcutting, over any straight-segment check.

Pure: the caller gives the joint limits and a test of whether the straight move between two configurations is free
(for the arm, `RobotContext.arm_path_free`). Distances are taken after multiplying each joint by its `scale` (the
torso lift is in metres, the arm joints in radians).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from emmoe_core.validation import require_positive_fields

# Whether the straight move between two configurations (joint units) stays clear.
SegmentFree = Callable[[np.ndarray, np.ndarray], bool]


@dataclass(frozen=True)
class JointPathConfig:
    """Settings of the planner.

    Attributes:
        step: longest tree edge, in scaled joint units (radians for the arm).
        max_samples: random samples before the planner gives up.
        shortcut_tries: random shortcut attempts on a found path.
        seed: seed of the sampler (plans are deterministic for a seed).
    """

    step: float = 0.4
    max_samples: int = 300
    shortcut_tries: int = 40
    seed: int = 0

    def __post_init__(self) -> None:
        require_positive_fields(self, ("step", "max_samples"))
        if self.shortcut_tries < 0:
            raise ValueError(f"JointPathConfig.shortcut_tries: expected >= 0, got {self.shortcut_tries}")


class _Tree:
    """A search tree: nodes (scaled) and the index of each node's parent (-1 at the root)."""

    def __init__(self, root: np.ndarray) -> None:
        self.nodes: list[np.ndarray] = [root]
        self.parents: list[int] = [-1]

    def nearest(self, point: np.ndarray) -> int:
        return int(np.argmin(np.linalg.norm(np.asarray(self.nodes) - point, axis=1)))

    def add(self, node: np.ndarray, parent: int) -> int:
        self.nodes.append(node)
        self.parents.append(parent)
        return len(self.nodes) - 1

    def branch(self, index: int) -> list[np.ndarray]:
        """Nodes from `index` back to the root."""
        path = []
        while index >= 0:
            path.append(self.nodes[index])
            index = self.parents[index]
        return path


def plan_joint_path(start: Sequence[float], goal: Sequence[float], lower: Sequence[float] | np.ndarray,
                    upper: Sequence[float] | np.ndarray, segment_free: SegmentFree,
                    config: JointPathConfig | None = None, scale: Sequence[float] | None = None) -> list[np.ndarray] | None:
    """Configurations from `start` to `goal` (both included) whose consecutive straight moves are all free.

    Returns:
        The path, or None when none was found within `config.max_samples` samples (or an end is not free to
        reach: the caller checks the ends themselves).
    """
    config = config or JointPathConfig()
    weights = np.ones(len(start)) if scale is None else np.asarray(scale, dtype=float)
    low, high = np.asarray(lower, dtype=float) * weights, np.asarray(upper, dtype=float) * weights

    def free(a: np.ndarray, b: np.ndarray) -> bool:
        return segment_free(a / weights, b / weights)

    first, last = np.asarray(start, dtype=float) * weights, np.asarray(goal, dtype=float) * weights
    if free(first, last):
        return [first / weights, last / weights]
    rng = np.random.default_rng(config.seed)
    trees = (_Tree(first), _Tree(last))
    for _ in range(config.max_samples):
        grown, other = trees
        sample = rng.uniform(low, high)
        added = _extend(grown, sample, config.step, free)
        if added is not None:
            joined = _connect(other, grown.nodes[added], config.step, free)
            if joined is not None:
                path = grown.branch(added)[::-1] + other.branch(joined)[1:]
                if grown.nodes[0] is not first:
                    path = path[::-1]
                return [node / weights for node in _shortcut(path, free, config.shortcut_tries, rng)]
        trees = (other, grown)
    return None


def _toward(origin: np.ndarray, target: np.ndarray, step: float) -> np.ndarray:
    gap = target - origin
    length = float(np.linalg.norm(gap))
    return target if length <= step else origin + gap * (step / length)


def _extend(tree: _Tree, target: np.ndarray, step: float, free: SegmentFree) -> int | None:
    """One step of the tree towards `target`; the new node's index, or None when that step is blocked."""
    near = tree.nearest(target)
    node = _toward(tree.nodes[near], target, step)
    if not free(tree.nodes[near], node):
        return None
    return tree.add(node, near)


def _connect(tree: _Tree, target: np.ndarray, step: float, free: SegmentFree) -> int | None:
    """Steps of the tree towards `target` until it is reached (its node's index) or a step is blocked (None)."""
    index = tree.nearest(target)
    while True:
        node = _toward(tree.nodes[index], target, step)
        if not free(tree.nodes[index], node):
            return None
        index = tree.add(node, index)
        if np.array_equal(node, target):
            return index


def _shortcut(path: list[np.ndarray], free: SegmentFree, tries: int,
              rng: np.random.Generator) -> list[np.ndarray]:
    """Drop the nodes between two random nodes of the path wherever the straight move between them is free."""
    for _ in range(tries):
        if len(path) < 3:
            break
        i, j = sorted(rng.choice(len(path), size=2, replace=False))
        if j - i > 1 and free(path[i], path[j]):
            path = path[:i + 1] + path[j:]
    return path
