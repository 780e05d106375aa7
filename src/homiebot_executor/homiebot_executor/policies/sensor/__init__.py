"""The sensor-only skills ("without background information"): NoMaD, PixNav, RT-1-X and Octo's jobs done from the
head cameras (RGB-D with intrinsics and pose), odometry and joint states alone.

Modules: context (settings, perception: looks, the online map, sightings, arm clearance against the perceived
cloud), navigate (exploration, standing spots, driving with replanning), manipulate (pick and put from point
clouds), handles (door and drawer handles, open door panels), articulate (open and close with the hand), skills
(SensorSkills: one attempt). Object finding goes through emmoe_core.perception.detector.
"""

from homiebot_executor.policies.sensor.context import SensorConfig
from homiebot_executor.policies.sensor.skills import SensorSkills

__all__ = ["SensorConfig", "SensorSkills"]
