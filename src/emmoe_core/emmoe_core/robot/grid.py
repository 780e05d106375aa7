"""A 2-D occupancy grid: what the privileged scene gives the skills to plan base motion on.

Grids follow nav_msgs/OccupancyGrid's layout: row-major, rows along +y, cell (0, 0) at `origin`.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from emmoe_core.validation import require_positive


@dataclass(frozen=True)
class OccupancyGrid:
    """A boolean occupancy grid.

    Attributes:
        origin: world (x, y) of the lower-left corner of cell (0, 0).
        resolution: cell size in metres.
        occupied: bool array of shape (rows, columns) = (ny, nx); occupied[j, i] is cell column i, row j.
    """

    origin: tuple[float, float]
    resolution: float
    occupied: np.ndarray

    def __post_init__(self) -> None:
        require_positive("resolution", self.resolution)
        if self.occupied.ndim != 2:
            raise ValueError(f"occupied must be a 2-D array, got shape {self.occupied.shape}")

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, columns)."""
        return self.occupied.shape  # type: ignore[return-value]

    def cell_of(self, x: float, y: float) -> tuple[int, int]:
        """(column, row) of the cell containing a world point (may be outside the grid)."""
        return (int(math.floor((x - self.origin[0]) / self.resolution)),
                int(math.floor((y - self.origin[1]) / self.resolution)))

    def center_of(self, column: int, row: int) -> tuple[float, float]:
        """World (x, y) of a cell's centre."""
        return (self.origin[0] + (column + 0.5) * self.resolution, self.origin[1] + (row + 0.5) * self.resolution)

    def inside(self, column: int, row: int) -> bool:
        """Whether the cell index lies in the grid."""
        return 0 <= row < self.shape[0] and 0 <= column < self.shape[1]

    def is_free(self, x: float, y: float) -> bool:
        """Whether a world point lies in a free cell (outside the grid counts as occupied)."""
        column, row = self.cell_of(x, y)
        return self.inside(column, row) and not bool(self.occupied[row, column])

    def inflated(self, radius: float) -> OccupancyGrid:
        """The grid with every occupied cell grown by `radius` metres (for a round robot of that radius)."""
        cells = int(math.ceil(radius / self.resolution))
        if cells <= 0:
            return self
        grown = self.occupied.copy()
        rows, columns = self.shape
        padded = np.pad(self.occupied, cells, constant_values=True)
        for dy in range(-cells, cells + 1):
            for dx in range(-cells, cells + 1):
                if math.hypot(dx, dy) * self.resolution <= radius + 1e-9:
                    grown |= padded[cells + dy: cells + dy + rows, cells + dx: cells + dx + columns]
        return OccupancyGrid(self.origin, self.resolution, grown)

    def reachable_from(self, x: float, y: float) -> np.ndarray:
        """Bool mask of the free cells 4-connected to the cell at (x, y) (all False when that cell is occupied)."""
        mask = np.zeros(self.shape, dtype=bool)
        column, row = self.cell_of(x, y)
        if not self.inside(column, row) or self.occupied[row, column]:
            return mask
        queue = deque([(column, row)])
        mask[row, column] = True
        while queue:
            column, row = queue.popleft()
            for dc, dr in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                c, r = column + dc, row + dr
                if self.inside(c, r) and not mask[r, c] and not self.occupied[r, c]:
                    mask[r, c] = True
                    queue.append((c, r))
        return mask

    def to_ros_data(self) -> list[int]:
        """Cells as nav_msgs/OccupancyGrid data: 100 occupied, 0 free, row-major from the origin."""
        return (self.occupied.astype(np.int8) * 100).ravel().tolist()
