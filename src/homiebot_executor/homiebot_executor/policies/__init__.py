"""Skill policies on the robot/skill interface (emmoe_core.robot): m3 (the privileged skills, one module per skill)
and remote (learned policies over HTTP); navigation (grid planner, base controller) and arm_ik (mink) serve both."""
