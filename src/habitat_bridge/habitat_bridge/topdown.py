"""Top-down map of a scene spec: floor plan, furniture, objects with labels, robot start (matplotlib, headless)."""

from __future__ import annotations

import math
from pathlib import Path

from habitat_bridge import layout
from habitat_bridge.scene_spec import SceneSpec


def _rectangle_corners(center: tuple[float, float], half: tuple[float, float], yaw: float) -> list[tuple[float,
                                                                                                          float]]:
    c, s = math.cos(yaw), math.sin(yaw)
    corners = []
    for du, dv in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
        u, v = du * half[0], dv * half[1]
        corners.append((center[0] + c * u - s * v, center[1] + s * u + c * v))
    return corners


def draw_topdown(spec: SceneSpec, path: str | Path, *, labels: bool = True, dpi: int = 110) -> Path:
    """Write a PNG top-down map of a scene at its start: rooms, walls, furniture, objects, the robot's start pose.

    Args:
        spec: the scene (objects need resolved offsets, see layout.resolve_offsets).
        path: output PNG path.
        labels: write furniture and object names.
        dpi: resolution.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, FancyArrow, Polygon

    xmin, ymin, xmax, ymax = spec.bounds()
    width, height = xmax - xmin, ymax - ymin
    figure, axes = plt.subplots(figsize=(min(12.0, 1.0 * width + 1.0), min(9.0, 1.0 * height + 0.8)), dpi=dpi)
    for room in spec.rooms:
        rx0, ry0, rx1, ry1 = room.bounds
        axes.add_patch(Polygon([(rx0, ry0), (rx1, ry0), (rx1, ry1), (rx0, ry1)], closed=True,
                               facecolor=room.floor_color, edgecolor="none", alpha=0.55, zorder=0))
        axes.text(rx0 + 0.15, ry0 + 0.12, room.name, fontsize=7, color="0.25", zorder=1)
    for wall in spec.walls:
        (x0, y0), (x1, y1) = wall.start, wall.end
        length = math.hypot(x1 - x0, y1 - y0)
        corners = _rectangle_corners(((x0 + x1) / 2, (y0 + y1) / 2), (length / 2 + wall.thickness / 2,
                                                                      wall.thickness / 2), math.atan2(y1 - y0, x1 - x0))
        axes.add_patch(Polygon(corners, closed=True, facecolor="0.2", edgecolor="none", zorder=2))
    for piece in spec.furniture:
        axes.add_patch(Polygon(_rectangle_corners((piece.pose.x, piece.pose.y), (piece.size[0] / 2,
                                                                                 piece.size[1] / 2), piece.pose.yaw),
                               closed=True, facecolor=piece.color, edgecolor="0.15", linewidth=0.8, zorder=3))
        # A tick on the front edge shows where the piece opens / is approached from.
        front = layout.local_to_world(piece, (0.0, -piece.size[1] / 2, 0.0))
        axes.plot([front[0]], [front[1]], marker="o", markersize=2.5, color="0.15", zorder=4)
        if labels:
            axes.text(piece.pose.x, piece.pose.y, piece.name, fontsize=6.5, ha="center", va="center", zorder=6,
                      bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "alpha": 0.7, "linewidth": 0})
    for obj in spec.objects:
        x, y, _, _ = layout.object_start_pose(spec, obj)
        axes.add_patch(Circle((x, y), max(0.05, layout.footprint_radius(obj)), facecolor=obj.color,
                              edgecolor="black", linewidth=0.6, zorder=7))
        if labels:
            axes.annotate(obj.name + (" (in)" if obj.inside else ""), (x, y), xytext=(4, 4),
                          textcoords="offset points", fontsize=5.5, zorder=8, color="0.1")
    rx, ry, ryaw = spec.robot.pose.x, spec.robot.pose.y, spec.robot.pose.yaw
    axes.add_patch(Circle((rx, ry), 0.28, facecolor="0.95", edgecolor="black", linewidth=1.0, zorder=9))
    axes.add_patch(FancyArrow(rx, ry, 0.35 * math.cos(ryaw), 0.35 * math.sin(ryaw), width=0.05, color="tab:red",
                              zorder=10))
    axes.text(rx, ry - 0.42, "Fetch", fontsize=7, ha="center", zorder=10)
    axes.set_xlim(xmin - 0.2, xmax + 0.2)
    axes.set_ylim(ymin - 0.2, ymax + 0.2)
    axes.set_aspect("equal")
    axes.set_xlabel("x (m)")
    axes.set_ylabel("y (m)")
    axes.set_title(f"{spec.name} (seed {spec.seed})", fontsize=9)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
