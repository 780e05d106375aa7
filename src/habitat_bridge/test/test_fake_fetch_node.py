"""The fake Fetch node's sensor publishing: a sample DDS refuses to send is dropped and the node goes on."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rclpy._rclpy_pybind11 import RCLError

from habitat_bridge.fetch.fake_fetch_node import FakeFetchNode


class _Publisher:
    """Refuses the first sample, as Fast DDS's write does under back-pressure, then sends."""

    topic_name = "/odom"

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.refused = False

    def publish(self, message: Any) -> None:
        if not self.refused:
            self.refused = True
            raise RCLError("Failed to publish: cannot publish data")
        self.sent.append(message)


class _Logger:
    def __init__(self) -> None:
        self.warnings: list[str] = []

    def warning(self, message: str, **_: Any) -> None:
        self.warnings.append(message)


def test_a_sample_dds_refuses_is_dropped_and_the_next_one_is_sent() -> None:
    logger = _Logger()
    node = SimpleNamespace(dropped_samples=0, node=SimpleNamespace(get_logger=lambda: logger))
    publisher = _Publisher()

    FakeFetchNode._publish_sensor(node, publisher, "tick 1")  # type: ignore[arg-type]
    FakeFetchNode._publish_sensor(node, publisher, "tick 2")  # type: ignore[arg-type]

    assert publisher.sent == ["tick 2"] and node.dropped_samples == 1
    assert logger.warnings == ["/odom: a sample was dropped (1 so far): Failed to publish: cannot publish data"]
