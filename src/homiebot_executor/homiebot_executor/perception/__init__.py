"""What the sensor-only skills know about the scene, built from the head cameras alone: depth back-projection
(points) and an occupancy map built online from depth (occupancy). Object finding is emmoe_core.perception's
(a detector behind one interface, shared with the bridge's text observation and the fake Fetch)."""
