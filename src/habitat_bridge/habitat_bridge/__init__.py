"""Simulator bridge of HomieBot: scene specs, the embedded MuJoCo apartment with a Fetch robot, the optional Habitat
backend, and the bridge node.

Modules: scene_spec (schema), official (the release's scene.json), catalog/furniture/layout (what scenes are made
of), apartment (generator), occupancy (grids, reachability), topdown (maps), backends (SimBackend interface, MuJoCo
and Habitat), bridge_core and bridge_node (ROS 2), tools (behind `homiebot sim`).
"""
