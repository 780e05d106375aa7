"""An occupancy map built online from depth: what the sensor-only navigation plans on and explores.

Each observation's depth is back-projected to world points. Points between `obstacle_min_height` and
`obstacle_max_height` above the floor mark their cells occupied; the floor seen (points below `floor_height`) and
the cells the camera rays cross before they hit something are marked free. A cell's state is a running score
(hits up, free sightings down), so a wrongly marked cell recovers when seen again: a door that opens, a chair that
moved. Points within `self_radius` of the base are the robot itself (self-filtering) and are ignored. Cells never
seen are unknown; a frontier is a free cell next to an unknown one.

The map has a fixed extent around the first pose it sees and the grid layout of emmoe_core.robot.grid.OccupancyGrid
(row-major, rows along +y), so the planner of homiebot_executor.policies.navigation runs on it unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from emmoe_core.robot.grid import OccupancyGrid
from emmoe_core.validation import require_positive_fields
from scipy import ndimage

UNKNOWN, FREE, OCCUPIED = 0, 1, 2


@dataclass(frozen=True)
class MapConfig:
    """Settings of the online map.

    Attributes:
        resolution: cell size (metres).
        extent: side of the square mapped around the first pose (metres).
        floor_height: points below this height are floor (free).
        obstacle_min_height: points at or above this height are obstacles.
        obstacle_max_height: points above this are ignored (above the robot).
        self_radius: points this close to the base centre are the robot itself.
        max_range: depth beyond this is ignored (metres).
        ray_stride: every n-th pixel row casts free-space rays (every column does: the columns set the rays'
            bearings, which the map resolves; the rows mostly their slope).
    """

    resolution: float = 0.05
    extent: float = 24.0
    floor_height: float = 0.04
    obstacle_min_height: float = 0.08
    obstacle_max_height: float = 1.7
    self_radius: float = 0.45
    max_range: float = 5.0
    ray_stride: int = 4

    def __post_init__(self) -> None:
        require_positive_fields(self, ("resolution", "extent", "self_radius", "max_range"))
        if not self.floor_height < self.obstacle_min_height < self.obstacle_max_height:
            raise ValueError("MapConfig: expected floor_height < obstacle_min_height < obstacle_max_height")
        if self.ray_stride < 1:
            raise ValueError(f"MapConfig.ray_stride: expected >= 1, got {self.ray_stride}")


class OnlineMap:
    """The occupancy map of one episode, grown from observations (see the module docstring)."""

    def __init__(self, centre: tuple[float, float], config: MapConfig | None = None) -> None:
        """An unknown map of `config.extent` metres around `centre`."""
        self.config = config or MapConfig()
        cells = int(math.ceil(self.config.extent / self.config.resolution))
        half = cells * self.config.resolution / 2
        self.origin = (centre[0] - half, centre[1] - half)
        self.score = np.zeros((cells, cells), dtype=np.int16)
        self.seen = np.zeros((cells, cells), dtype=bool)
        self.observations = 0

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns)."""
        return self.score.shape  # type: ignore[return-value]

    def _cells(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(columns, rows, inside) of world points."""
        columns = np.floor((x - self.origin[0]) / self.config.resolution).astype(np.int64)
        rows = np.floor((y - self.origin[1]) / self.config.resolution).astype(np.int64)
        inside = (columns >= 0) & (rows >= 0) & (columns < self.shape[1]) & (rows < self.shape[0])
        return columns, rows, inside

    def integrate(self, points: np.ndarray, camera: tuple[float, float, float], base: tuple[float, float]) -> None:
        """Add one view's organised point image (H, W, 3; NaN for no return) seen from `camera` with the base at
        `base`."""
        config = self.config
        flat = points.reshape(-1, 3)
        flat = flat[np.isfinite(flat).all(axis=1)]
        near_base = np.hypot(flat[:, 0] - base[0], flat[:, 1] - base[1]) < config.self_radius
        flat = flat[~near_base]
        height = flat[:, 2]
        obstacle = flat[(height >= config.obstacle_min_height) & (height <= config.obstacle_max_height)]
        floor = flat[height < config.floor_height]
        # Free space: samples along rays from the camera to each return of every ray_stride-th row, short of the
        # last cell.
        stride = points[::config.ray_stride].reshape(-1, 3)
        stride = stride[np.isfinite(stride).all(axis=1)]
        free_x: list[np.ndarray] = [floor[:, 0]]
        free_y: list[np.ndarray] = [floor[:, 1]]
        if len(stride):
            length = np.hypot(stride[:, 0] - camera[0], stride[:, 1] - camera[1])
            samples = int(math.ceil(float(length.max()) / config.resolution)) + 1
            fractions = np.linspace(0.0, 1.0, samples, dtype=np.float32)[:, None]
            keep = fractions * length[None, :] < length[None, :] - 1.5 * config.resolution
            xs = camera[0] + fractions * (stride[None, :, 0] - camera[0])
            ys = camera[1] + fractions * (stride[None, :, 1] - camera[1])
            free_x.append(xs[keep])
            free_y.append(ys[keep])
        self._mark(np.concatenate(free_x), np.concatenate(free_y), -1)
        self._mark(obstacle[:, 0], obstacle[:, 1], 3)
        self._mark_disc(base, config.self_radius * 0.8)
        self.observations += 1

    def _mark(self, x: np.ndarray, y: np.ndarray, delta: int) -> None:
        """Add `delta` once to the score of every cell holding some of the points."""
        columns, rows, inside = self._cells(x, y)
        touched = np.zeros(self.score.size, dtype=bool)
        touched[rows[inside] * self.shape[1] + columns[inside]] = True
        touched = touched.reshape(self.shape)
        self.score[touched] = np.clip(self.score[touched] + delta, -6, 9)
        self.seen |= touched

    def _mark_disc(self, centre: tuple[float, float], radius: float) -> None:
        """Cells under the robot are free (it stands there)."""
        rows, columns = self.shape
        c0, r0 = self._cell(centre)
        span = int(math.ceil(radius / self.config.resolution))
        rr, cc = np.mgrid[max(0, r0 - span):min(rows, r0 + span + 1), max(0, c0 - span):min(columns, c0 + span + 1)]
        disc = np.hypot(rr - r0, cc - c0) * self.config.resolution <= radius
        self.score[rr[disc], cc[disc]] = np.minimum(self.score[rr[disc], cc[disc]], -1)
        self.seen[rr[disc], cc[disc]] = True

    def _cell(self, point: tuple[float, float]) -> tuple[int, int]:
        return (int(math.floor((point[0] - self.origin[0]) / self.config.resolution)),
                int(math.floor((point[1] - self.origin[1]) / self.config.resolution)))

    def states(self) -> np.ndarray:
        """(rows, columns) of UNKNOWN, FREE, OCCUPIED."""
        state = np.full(self.shape, UNKNOWN, dtype=np.int8)
        state[self.seen & (self.score <= 0)] = FREE
        state[self.seen & (self.score > 0)] = OCCUPIED
        return state

    def grid(self, unknown_blocked: bool = False) -> OccupancyGrid:
        """The map as an OccupancyGrid: occupied cells, and unknown ones when `unknown_blocked`."""
        state = self.states()
        occupied = state == OCCUPIED
        if unknown_blocked:
            occupied |= state == UNKNOWN
        return OccupancyGrid(self.origin, self.config.resolution, occupied)

    def frontiers(self) -> np.ndarray:
        """(rows, columns) bool: free cells with an unknown 4-neighbour."""
        state = self.states()
        unknown = state == UNKNOWN
        near_unknown = ndimage.binary_dilation(unknown, structure=ndimage.generate_binary_structure(2, 1))
        frontier: np.ndarray = (state == FREE) & near_unknown
        return frontier

    def image(self) -> np.ndarray:
        """(rows, columns, 3) uint8 picture: unknown grey, free white, occupied black, +y up."""
        colours = np.array([[150, 150, 150], [255, 255, 255], [20, 20, 20]], dtype=np.uint8)
        picture: np.ndarray = colours[self.states()][::-1]
        return picture
