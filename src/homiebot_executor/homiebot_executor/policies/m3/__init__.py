"""M3, the privileged skills ("with background information"), on the robot/skill interface (emmoe_core.robot).

Every attempt starts with the arm reset (fingers opened unless holding, torso lowered, arm tucked; not counted in the
step budget), then:

- navigate: plan on the backend's occupancy grid (walls, furniture, doors and drawers at their current position,
  a door as its panel), inflated by the robot's radius; pick a standing spot (an object: the reachable cell nearest
  it, in front of its receptacle when that has a front; furniture: nearest its front face, or its footprint for tables
  and chairs; a door or drawer: in front of its handle; a room: nearest its centre); follow the shortened path with the
  base controller and turn to face the target. Success (release rule): the base ends within 0.65 m of the spot and
  the contact force stayed under 5 N.
- pick: move the base within arm's reach if needed (where no wall stands between it and the object; in line with an
  object inside a fridge, cabinet or drawer), solve the arm with mink for a top-down grasp (a level one for objects
  on shelves with a board close above, with tilted ones in between; level ones also after the steep ones on a
  fridge's top shelf; last, top-down with the fingers closing towards the robot), approach from 10 cm (through a
  staging pose up to 0.55 m back and a straight line in when needed), weld-grasp, lift, tuck. Success: the right
  object is held and was not dropped.
- put: choose a free spot on a support region of the receptacle (inside a fridge or a drawer only when it is open),
  stand where no wall is in the way, carry the object over it, release, let it settle. Success: the object rests
  within 0.5 m of that region.
- open / close: stand in front of the handle, reach it, retract, step out of the door's swing or the drawer's
  travel, drive the joint past its open threshold (or back to closed). Success: the joint is past the threshold.

One control step is `control_period` seconds of simulated time; step budgets count control steps (500 for
navigation, 200 for the others). Physics runs in simulated time: the skills step the backend themselves. Every
backend call holds `lock`, so a bridge node sharing the backend can serve observations between control steps.

The skills drive an emmoe_core.robot.interface.SimulatedRobot (a Robot plus a PrivilegedScene), so any backend that
implements it runs them. Modules here: context (settings, the privileged scene on the stepped robot access),
navigate (standing spots, driving), pick, place, articulate (open/close), skills (PrivilegedSkills: one attempt).
Shared with the sensor-only skills, one level up in homiebot_executor.policies: attempt (the running attempt, stepping,
the attempt wrapper), arm_motion (arm routing, IK moves), arm_ik (the IK solver), navigation (grid path planning,
the base controller).
"""

from homiebot_executor.policies.m3.context import PrivilegedConfig
from homiebot_executor.policies.m3.skills import PrivilegedSkills

__all__ = ["PrivilegedConfig", "PrivilegedSkills"]
