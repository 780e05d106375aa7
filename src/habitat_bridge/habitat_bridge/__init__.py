"""Simulator bridge: scene specs, the embedded MuJoCo apartment with a Fetch robot, optional Habitat and real-Fetch backends, and the bridge node."""
