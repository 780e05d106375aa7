"""The `fetch` backend inside a composed stack: the robot's ROS interfaces, the backend around them, and the memory
of the room kept up to date from the planner's step records (/emmoe/steps).

The robot's node spins on an executor and thread of its own: the backend's calls block until odometry, joint
states and camera frames arrive, so those callbacks must never wait for a thread of the stack's executor (whose
threads may all be blocked in skills and services that are waiting for exactly those messages).
"""

from __future__ import annotations

import threading
from typing import Any

from emmoe_core.topics import STEPS_TOPIC

from habitat_bridge.fetch.backend import FetchBackend, FetchBackendConfig
from habitat_bridge.fetch.config import FetchConfig
from habitat_bridge.fetch.robot import FetchRobot


class FetchRobotNode:
    """The `fetch_robot` node, its FetchBackend, and the thread that spins it (see the module docstring); closing
    the backend stops the thread and destroys the node."""

    def __init__(self, config: FetchConfig | None = None, backend_config: FetchBackendConfig | None = None,
                 **node_kwargs: Any) -> None:
        from emmoe_interfaces.msg import StepRecord
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node

        self.node = Node("fetch_robot", **node_kwargs)
        self.backend = FetchBackend(FetchRobot(self.node, config), backend_config, on_close=self._stop_spinning)
        self.node.create_subscription(StepRecord, STEPS_TOPIC, self._on_step, 50)
        self._executor = SingleThreadedExecutor(context=self.node.context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name="fetch_robot", daemon=True)
        self._thread.start()

    def _on_step(self, record: Any) -> None:
        self.backend.apply_step(record.subtask.action, record.target_instance, record.place_instance, record.success)

    def _spin(self) -> None:
        from rclpy.executors import ExternalShutdownException

        try:
            self._executor.spin()
        except ExternalShutdownException:
            pass
        except Exception:  # noqa: BLE001 - a callback that ran as the context shut down found its entities gone
            if self.node.context.ok():
                raise

    def _stop_spinning(self) -> None:
        """Stop spinning and destroy the node (the backend calls this when it closes)."""
        self._executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
