"""What the sensor-only skills know about the scene, built from the head cameras alone: depth back-projection
(points), object finding behind a pluggable detector interface (detector), and an occupancy map built online
from depth (occupancy)."""
