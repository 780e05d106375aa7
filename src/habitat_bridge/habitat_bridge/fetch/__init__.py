"""The `fetch` backend: a real Fetch (or the fake Fetch) driven through its standard ROS interfaces.

Modules: config (interface names, limits), safety (limits, workspace fence, software stop, dry-run, stale-sensor
check; no ROS), robot (FetchRobot: the robot reached through its topics and actions, every command through the safety
gate), fake_fetch and fake_fetch_node (the fake Fetch: MuJoCo behind a real Fetch's interfaces, for tests and CI).
"""
