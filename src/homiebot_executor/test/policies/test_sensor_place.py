"""Where the sensor-only Put sets things down: the main surface by area, and how far inside its seen edges; and how
it tells that something was set down."""

from __future__ import annotations

import numpy as np

from homiebot_executor.policies.sensor.manipulate import edge_distances, main_level, standing_points


def grid_points(x: tuple[float, float], y: tuple[float, float], z: float, step: float) -> np.ndarray:
    """Points on a level rectangle, `step` apart."""
    xs, ys = np.meshgrid(np.arange(x[0], x[1], step), np.arange(y[0], y[1], step))
    return np.column_stack([xs.ravel(), ys.ravel(), np.full(xs.size, z)])


def test_the_seat_is_the_main_level_though_the_nearer_armrest_has_more_points() -> None:
    # An armrest near the camera, sampled every 5 mm, and a larger seat farther away, sampled every 3 cm.
    armrest = grid_points((0.0, 0.15), (0.0, 0.7), 0.62, 0.005)
    seat = grid_points((0.15, 1.0), (0.0, 0.7), 0.45, 0.03)
    assert len(armrest) > len(seat)
    level = main_level(np.concatenate([armrest, seat]))
    assert np.allclose(level[:, 2], 0.45) and len(level) == len(seat)


def test_main_level_of_nothing_is_nothing() -> None:
    assert main_level(np.zeros((0, 3))).shape == (0, 3)


def test_edge_distances_grow_towards_the_middle_and_stop_at_an_occluded_patch() -> None:
    top = grid_points((0.0, 1.0), (0.0, 0.6), 0.76, 0.01)
    queries = np.array([[0.02, 0.3, 0.76], [0.2, 0.3, 0.76], [0.5, 0.3, 0.76]])
    near_edge, farther, middle = edge_distances(top, queries)
    assert near_edge < 0.06 < farther < middle and middle >= 0.25
    # Something standing on the middle hides the surface there: its neighbourhood counts as edge.
    hidden = top[np.hypot(top[:, 0] - 0.5, top[:, 1] - 0.3) > 0.08]
    assert edge_distances(hidden, queries[2:])[0] < 0.06


def test_a_put_counts_the_points_that_stand_on_the_spot() -> None:
    spot = np.array([1.0, 0.0, 0.75])
    surface = grid_points((0.8, 1.2), (-0.2, 0.2), 0.75, 0.02)
    peach = np.array([[1.0 + dx, dy, 0.75 + dz] for dx in (-0.02, 0.0, 0.02) for dy in (-0.02, 0.02)
                      for dz in (0.03, 0.05)])
    apart = peach + np.array([0.3, 0.0, 0.0])  # something already standing 30 cm away
    before = np.concatenate([surface, apart])
    after = np.concatenate([surface, apart, peach])
    assert standing_points(before, spot, 0.06) == 0  # neither the surface nor what stands beside the spot count
    assert standing_points(after, spot, 0.06) == len(peach)
    assert standing_points(np.zeros((0, 3)), spot, 0.06) == 0
