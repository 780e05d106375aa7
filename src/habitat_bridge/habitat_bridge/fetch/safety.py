"""Safety of the `fetch` backend for a person standing next to the robot, as a pure core (no ROS).

`SafetyGate` sits between the skills' commands and the robot's controllers:
- velocity limits: base forward speed and turn rate, and every joint's speed (a trajectory to a joint target is
  given the time its largest move needs at that speed);
- acceleration limits: a base command moves from the previous one by at most the allowed change per control period;
- a workspace fence: an axis-aligned box in the odometry frame; a base command that would carry the robot's centre
  out of it (or further out) within the fence horizon is cut to zero forward speed (turning in place stays allowed);
- a laser guard: forward speed is capped so that the base, braking at the acceleration limit, stops `stop_distance`
  short of the nearest thing the base laser sees in its path (`clearance_ahead`: a person stepping in front of the
  robot, furniture); at that distance only turning and backing away remain (the laser does not see behind);
- a software stop: `stop()` latches; every later command comes out as zero velocity / "hold where you are" until
  `release()`. The ROS wrapper calls stop() from its stop-topic callback, so motion halts at the next control period;
- dry-run: the gate still computes every command, but `sends` says not to send it (the wrapper logs it instead);
- stale sensors: `stale(stamps, now)` names every sensor whose last message is older than `sensor_max_age` (or that
  never arrived); the backend refuses to start while any is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from emmoe_core.validation import require_positive_fields


@dataclass(frozen=True)
class SafetyConfig:
    """Limits of the `fetch` backend (defaults are conservative for a first run beside a person).

    Attributes:
        max_forward: largest base forward (and backward) speed, m/s.
        max_turn: largest base turn rate, rad/s.
        max_forward_accel: largest change of forward speed, m/s^2.
        max_turn_accel: largest change of turn rate, rad/s^2.
        max_joint_speed: largest joint speed of arm, torso and head, rad/s or m/s.
        fence: (x_min, y_min, x_max, y_max) the base centre must stay within, odometry frame, metres; None: no fence.
        fence_horizon: a command is checked against the fence where it would carry the base in this many seconds.
        stop_distance: the laser guard keeps the base's front edge this far (metres) from what the laser sees ahead.
        base_latency: seconds from a base command to the base following it (the guard counts them as driven at the
            commanded speed before braking begins).
        sensor_max_age: a sensor whose last message is older than this (seconds) is stale.
        dry_run: compute and log every command, send none.
    """

    max_forward: float = 0.3
    max_turn: float = 0.6
    max_forward_accel: float = 0.5
    max_turn_accel: float = 1.5
    max_joint_speed: float = 0.5
    fence: tuple[float, float, float, float] | None = None
    fence_horizon: float = 0.5
    stop_distance: float = 0.05
    base_latency: float = 0.1
    sensor_max_age: float = 0.5
    dry_run: bool = False

    def __post_init__(self) -> None:
        require_positive_fields(self, ("max_forward", "max_turn", "max_forward_accel", "max_turn_accel",
                                       "max_joint_speed", "fence_horizon", "stop_distance", "base_latency",
                                       "sensor_max_age"))
        if self.fence is not None:
            if len(self.fence) != 4 or not all(math.isfinite(value) for value in self.fence):
                raise ValueError(f"SafetyConfig.fence must be (x_min, y_min, x_max, y_max), got {self.fence!r}")
            x_min, y_min, x_max, y_max = self.fence
            if not (x_min < x_max and y_min < y_max):
                raise ValueError(f"SafetyConfig.fence is empty: {self.fence!r}")


class SafetyGate:
    """Limits, fence, software stop and dry-run for the commands to one robot (see the module docstring)."""

    def __init__(self, config: SafetyConfig | None = None) -> None:
        self.config = config or SafetyConfig()
        self._stopped = False
        self._last = (0.0, 0.0)

    @property
    def stopped(self) -> bool:
        """Whether the software stop is latched."""
        return self._stopped

    @property
    def sends(self) -> bool:
        """Whether commands go to the robot (False in dry-run)."""
        return not self.config.dry_run

    def stop(self) -> None:
        """Latch the software stop: from now on every command halts the robot."""
        self._stopped = True
        self._last = (0.0, 0.0)

    def release(self) -> None:
        """Release the software stop (an operator's decision; nothing releases it automatically)."""
        self._stopped = False

    def base_command(self, forward: float, turn: float, period: float, pose: tuple[float, float, float],
                     clearance: float = math.inf) -> tuple[float, float]:
        """The (forward, turn) to send for a requested one, `period` seconds after the previous command, with the
        base at `pose` (x, y, yaw in the odometry frame) and `clearance` metres free ahead of its front edge (the
        laser guard; `clearance_ahead`)."""
        if self._stopped or not (math.isfinite(forward) and math.isfinite(turn)):
            self._last = (0.0, 0.0)
            return self._last
        config = self.config
        forward = _clamp(forward, config.max_forward)
        turn = _clamp(turn, config.max_turn)
        last_forward, last_turn = self._last
        forward = last_forward + _clamp(forward - last_forward, config.max_forward_accel * period)
        turn = last_turn + _clamp(turn - last_turn, config.max_turn_accel * period)
        if forward > 0.0:
            forward = min(forward, guarded_speed(clearance - config.stop_distance, config.max_forward_accel,
                                                 period + config.base_latency))
        if forward and not self.inside_fence_after(forward, pose):
            forward = 0.0
        self._last = (forward, turn)
        return self._last

    def inside_fence_after(self, forward: float, pose: tuple[float, float, float]) -> bool:
        """Whether driving at `forward` for the fence horizon keeps the base centre inside the fence (always, without
        one; a base already outside may only drive back towards it)."""
        if self.config.fence is None:
            return True
        x, y, yaw = pose
        step = forward * self.config.fence_horizon
        ahead = (x + step * math.cos(yaw), y + step * math.sin(yaw))
        there = _outside_by(ahead, self.config.fence)
        return there <= 0.0 or there < _outside_by((x, y), self.config.fence)

    def joint_motion_time(self, current: Sequence[float], target: Sequence[float]) -> float:
        """Seconds a move from `current` to `target` joint positions takes at the joint speed limit (at least one
        control period's worth of 0.1 s)."""
        if len(current) != len(target):
            raise ValueError(f"{len(target)} joint targets for {len(current)} joints")
        largest = max((abs(goal - now) for now, goal in zip(current, target)), default=0.0)
        return max(0.1, largest / self.config.max_joint_speed)

    def stale(self, stamps: Mapping[str, float | None], now: float) -> list[str]:
        """The sensors (of `stamps`: name -> time of the last message, None when none came) that are stale at
        `now`."""
        return [name for name, stamp in stamps.items()
                if stamp is None or now - stamp > self.config.sensor_max_age]


def guarded_speed(room: float, braking: float, reaction_time: float) -> float:
    """The largest forward speed that, held for `reaction_time` seconds and then braked at `braking` m/s^2, stays
    within `room` metres (v t + v^2 / 2 braking = room); 0 without room."""
    if room <= 0.0:
        return 0.0
    reaction = braking * reaction_time
    return -reaction + math.sqrt(reaction * reaction + 2.0 * braking * room)


def clearance_ahead(ranges: np.ndarray, angle_min: float, angle_increment: float, mount_x: float,
                    base_radius: float) -> float:
    """How far (metres) a round base of `base_radius` can drive straight ahead before it touches a point of the laser
    scan (`ranges` from `angle_min` in steps of `angle_increment`, the laser `mount_x` ahead of the base centre;
    inf and nan ranges are no returns): inf with nothing in its path, negative when something is already inside."""
    ranges = np.asarray(ranges, dtype=float)
    angles = angle_min + angle_increment * np.arange(len(ranges))
    seen = np.isfinite(ranges)
    x = ranges[seen] * np.cos(angles[seen]) + mount_x
    y = ranges[seen] * np.sin(angles[seen])
    in_path = (np.abs(y) < base_radius) & (x > 0.0)
    if not in_path.any():
        return math.inf
    return float(np.min(x[in_path] - np.sqrt(base_radius ** 2 - y[in_path] ** 2)))


def _clamp(value: float, limit: float) -> float:
    return max(-limit, min(limit, value))


def _outside_by(point: tuple[float, float], fence: tuple[float, float, float, float]) -> float:
    """How far a point lies outside the fence box (0 or negative inside: minus the distance to its nearest side)."""
    x, y = point
    x_min, y_min, x_max, y_max = fence
    dx = max(x_min - x, x - x_max)
    dy = max(y_min - y, y - y_max)
    if dx <= 0 and dy <= 0:
        return max(dx, dy)
    return math.hypot(max(dx, 0.0), max(dy, 0.0))
