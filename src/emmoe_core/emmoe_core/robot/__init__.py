"""The robot/skill interface: how skills drive a robot, whichever backend (MuJoCo, Habitat, a real Fetch) serves it.

Layers: emmoe_interfaces -> emmoe_core (this package) -> habitat_bridge (implements it) | homiebot_executor (drives
it). Neither side imports the other; both import only this package for robot facts and the types they exchange.

- `interface.Robot`: base velocity, arm and torso joint targets, gripper, head cameras, robot state, the robot's
  kinematic description (for IK), `step` (let commands act). A real Fetch's drivers offer all of it.
- `interface.PrivilegedScene`: ground truth for the M3 setting only: object and door/drawer states, driving a door
  or drawer, the occupancy grid, the scene layout (furniture, parts, support regions), arm collision checks.
- `interface.SimulatedRobot`: both (every simulator backend).
- `state`: Pose, RobotState, InstanceState, ContainerState, Observation, BackendError, UnknownNameError.
- `grid.OccupancyGrid`, `layout.SceneLayout` (FurnitureLayout, PartLayout, SupportRegion).
- `fetch`: Fetch's joint names, tucked arm, base radius, arm reach.
"""
