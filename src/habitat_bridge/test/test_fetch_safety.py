"""The `fetch` backend's safety core: limits, acceleration ramps, the workspace fence, the laser guard, the software
stop, dry-run and the stale-sensor check (no ROS)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from habitat_bridge.fetch.safety import SafetyConfig, SafetyGate, clearance_ahead

AT_ORIGIN = (0.0, 0.0, 0.0)


def test_speeds_are_clamped_and_ramped_by_the_acceleration_limits():
    gate = SafetyGate(SafetyConfig(max_forward=0.3, max_turn=0.6, max_forward_accel=0.5, max_turn_accel=1.5))
    commands = [gate.base_command(2.0, -5.0, 0.1, AT_ORIGIN) for _ in range(10)]
    assert commands[0] == pytest.approx((0.05, -0.15))
    assert commands[1] == pytest.approx((0.10, -0.30))
    assert commands[-1] == pytest.approx((0.3, -0.6))
    assert max(abs(forward) for forward, _ in commands) <= 0.3 + 1e-12
    # Slowing down is ramped too (no jerk into a stop, except by the software stop).
    assert gate.base_command(0.0, 0.0, 0.1, AT_ORIGIN) == pytest.approx((0.25, -0.45))


def test_the_software_stop_halts_at_once_and_latches_until_released():
    gate = SafetyGate()
    for _ in range(10):
        gate.base_command(0.3, 0.5, 0.1, AT_ORIGIN)
    gate.stop()
    assert gate.stopped
    assert gate.base_command(0.3, 0.5, 0.1, AT_ORIGIN) == (0.0, 0.0)
    assert gate.base_command(0.3, 0.5, 0.1, AT_ORIGIN) == (0.0, 0.0)
    gate.release()
    # After a release the base starts again from rest, ramped.
    assert gate.base_command(0.3, 0.0, 0.1, AT_ORIGIN) == pytest.approx((0.05, 0.0))


def test_non_finite_commands_halt_the_base():
    gate = SafetyGate()
    gate.base_command(0.3, 0.0, 0.1, AT_ORIGIN)
    assert gate.base_command(math.nan, 0.0, 0.1, AT_ORIGIN) == (0.0, 0.0)
    assert gate.base_command(0.1, math.inf, 0.1, AT_ORIGIN) == (0.0, 0.0)


def test_the_fence_stops_driving_out_but_allows_turning_and_driving_back():
    gate = SafetyGate(SafetyConfig(fence=(-1.0, -1.0, 1.0, 1.0), fence_horizon=0.5, max_forward_accel=10.0,
                                   max_turn_accel=10.0))
    near_the_east_side = (0.95, 0.0, 0.0)
    assert gate.base_command(0.3, 0.4, 0.1, near_the_east_side) == pytest.approx((0.0, 0.4))
    facing_west = (0.95, 0.0, math.pi)
    assert gate.base_command(0.3, 0.0, 0.1, facing_west) == pytest.approx((0.3, 0.0))
    outside_facing_in = (1.5, 0.0, math.pi)
    assert gate.base_command(0.3, 0.0, 0.1, outside_facing_in)[0] == pytest.approx(0.3)
    outside_facing_out = (1.5, 0.0, 0.0)
    assert gate.base_command(0.3, 0.0, 0.1, outside_facing_out)[0] == 0.0
    assert SafetyGate().inside_fence_after(5.0, (100.0, 100.0, 0.0))  # no fence configured


def scan_of_a_wall_ahead(distance: float, mount_x: float = 0.2) -> np.ndarray:
    """Ranges (-pi/2..pi/2 in 181 rays) of a laser `mount_x` ahead of the base centre facing a wall `distance` ahead
    of the centre."""
    angles = np.linspace(-math.pi / 2, math.pi / 2, 181)
    with np.errstate(divide="ignore"):
        ranges = (distance - mount_x) / np.cos(angles)
    return np.where((np.cos(angles) > 1e-9) & (ranges < 25.0), ranges, np.inf)


def test_the_clearance_ahead_is_the_drive_to_the_nearest_point_in_the_base_path():
    step = math.pi / 180
    # A wall 1.5 m ahead of the centre: a base of radius 0.3 touches it after 1.2 m.
    assert clearance_ahead(scan_of_a_wall_ahead(1.5), -math.pi / 2, step, 0.2, 0.3) == pytest.approx(1.2, abs=1e-6)
    # A post 1 m ahead and 0.2 m to the left: the round front edge meets it after 1 - sqrt(0.3^2 - 0.2^2).
    ranges = np.full(181, np.inf)
    ranges[90 + round(math.degrees(math.atan2(0.2, 0.8)))] = math.hypot(0.8, 0.2)
    expected = 1.0 - math.sqrt(0.3 ** 2 - 0.2 ** 2)
    assert clearance_ahead(ranges, -math.pi / 2, step, 0.2, 0.3) == pytest.approx(expected, abs=0.01)
    # Beside the path (0.4 m to the left) it is no obstacle; no returns at all: nothing in the way.
    ranges[:] = np.inf
    ranges[90 + round(math.degrees(math.atan2(0.4, 0.8)))] = math.hypot(0.8, 0.4)
    assert clearance_ahead(ranges, -math.pi / 2, step, 0.2, 0.3) == math.inf
    assert clearance_ahead(np.full(181, np.nan), -math.pi / 2, step, 0.2, 0.3) == math.inf


def test_the_laser_guard_brakes_to_a_stop_short_of_what_is_ahead_and_allows_turning_and_backing():
    config = SafetyConfig(max_forward=0.3, max_forward_accel=0.5, max_turn_accel=10.0, stop_distance=0.05,
                          base_latency=0.05)
    gate = SafetyGate(config)
    for _ in range(10):
        gate.base_command(0.3, 0.0, 0.1, AT_ORIGIN)
    assert gate.base_command(0.3, 0.0, 0.1, AT_ORIGIN, clearance=2.0) == pytest.approx((0.3, 0.0))
    # 5 cm beyond the stop distance: no faster than one more 0.1 s period, the base's 0.05 s latency and braking at
    # 0.5 m/s^2 cover 5 cm.
    forward = gate.base_command(0.3, 0.0, 0.1, AT_ORIGIN, clearance=0.1)[0]
    assert forward * 0.15 + forward ** 2 / (2 * 0.5) == pytest.approx(0.05)
    # At the stop distance (or with something already in the path, or no fresh scan): no forward motion at all, but
    # turning in place and backing away stay allowed.
    for clearance in (0.05, -0.1, -math.inf):
        assert gate.base_command(0.3, 0.4, 0.1, AT_ORIGIN, clearance=clearance) == pytest.approx((0.0, 0.4))
    assert gate.base_command(-0.1, 0.0, 0.1, AT_ORIGIN, clearance=0.0)[0] == pytest.approx(-0.05)
    # Driving up to a wall at full speed, commanded every 50 ms: the base never gets closer than the stop distance.
    gate, position = SafetyGate(config), 0.0
    for _ in range(200):
        forward, _ = gate.base_command(0.3, 0.0, 0.05, (position, 0.0, 0.0), clearance=1.0 - position)
        position += forward * 0.05
    assert 1.0 - config.stop_distance - 0.02 < position <= 1.0 - config.stop_distance + 1e-9


def test_dry_run_computes_commands_but_sends_none():
    gate = SafetyGate(SafetyConfig(dry_run=True))
    assert not gate.sends
    assert gate.base_command(0.3, 0.0, 0.1, AT_ORIGIN) == pytest.approx((0.05, 0.0))
    assert SafetyGate().sends


def test_joint_moves_take_the_time_the_speed_limit_needs():
    gate = SafetyGate(SafetyConfig(max_joint_speed=0.5))
    assert gate.joint_motion_time([0.0, 0.0], [1.0, -0.25]) == pytest.approx(2.0)
    assert gate.joint_motion_time([0.0], [0.0]) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="2 joint targets for 1 joints"):
        gate.joint_motion_time([0.0], [0.0, 1.0])


def test_stale_sensors_are_named():
    gate = SafetyGate(SafetyConfig(sensor_max_age=0.5))
    stamps = {"odom": 10.0, "joint_states": 9.2, "head_camera": None}
    assert gate.stale(stamps, now=10.1) == ["joint_states", "head_camera"]
    assert gate.stale({"odom": 10.0}, now=10.4) == []


@pytest.mark.parametrize("bad, field", [
    ({"max_forward": 0.0}, "max_forward"),
    ({"max_turn": -1.0}, "max_turn"),
    ({"sensor_max_age": math.nan}, "sensor_max_age"),
    ({"fence": (1.0, 0.0, 0.0, 1.0)}, "fence"),
    ({"fence": (0.0, 0.0, 1.0)}, "fence"),
])
def test_bad_limits_name_their_field(bad, field):
    with pytest.raises(ValueError, match=f"SafetyConfig.{field}"):
        SafetyConfig(**bad)


def test_bad_interface_names_and_settings_name_their_field():
    from habitat_bridge.fetch.config import FetchConfig, FetchTopics
    from habitat_bridge.fetch.fake_fetch import FakeFetchConfig

    with pytest.raises(ValueError, match="FetchTopics.odom must be an absolute ROS name"):
        FetchTopics(odom="odom")
    with pytest.raises(ValueError, match="FetchConfig.control_period must be positive"):
        FetchConfig(control_period=0.0)
    with pytest.raises(ValueError, match="FakeFetchConfig.tick must be positive"):
        FakeFetchConfig(tick=-0.02)
