"""The QoS of the benchmark's two topics, shared by every publisher and subscriber of them.

Both are reliable and transient-local: a reader that matches a writer late (discovery is slower on a loaded machine)
still gets what was published before, so a run that ends right after its goal is never lost between the planner and
the evaluator (/emmoe/steps), nor a score between the evaluator and the runner (/emmoe/run_scores). A volatile reader
(`ros2 topic echo`) still matches, without that history.
"""

from __future__ import annotations

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy

# History kept for late readers: more than a run's records (20 steps plus its end) and a stack's scores in flight.
STEPS_DEPTH = 100
SCORES_DEPTH = 50


def steps_qos() -> QoSProfile:
    """QoS of /emmoe/steps (StepRecord, the planner to the evaluator)."""
    return QoSProfile(depth=STEPS_DEPTH, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)


def scores_qos() -> QoSProfile:
    """QoS of /emmoe/run_scores (RunScore, the evaluator to the runner)."""
    return QoSProfile(depth=SCORES_DEPTH, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)
