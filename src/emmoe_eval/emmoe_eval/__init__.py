"""EMMOE evaluation: dataset and run I/O, the EMMOE metrics, reports, rosbag replay scoring and the evaluator node."""
