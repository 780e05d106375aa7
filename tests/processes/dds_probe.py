"""A talker or a listener on /dds_probe, started like every node of the project (emmoe_core.ros_helpers.spin_node,
which refuses to start off loopback), for the socket and domain-isolation tests.

    python dds_probe.py talk      # publishes "probe <n>" every 50 ms; prints "talking"
    python dds_probe.py listen    # prints "listening", then "heard <n>" for the first message and every tenth
"""

from __future__ import annotations

import sys

from rclpy.node import Node
from std_msgs.msg import String

from emmoe_core.ros_helpers import spin_node

TOPIC = "/dds_probe"


def talker() -> Node:
    node = Node("dds_probe_talker")
    publisher = node.create_publisher(String, TOPIC, 10)
    count = [0]

    def publish() -> None:
        count[0] += 1
        publisher.publish(String(data=f"probe {count[0]}"))

    node.create_timer(0.05, publish)
    return node


def listener() -> Node:
    node = Node("dds_probe_listener")
    heard = [0]

    def on_message(_message: String) -> None:
        heard[0] += 1
        if heard[0] == 1 or heard[0] % 10 == 0:
            print(f"heard {heard[0]}", flush=True)

    node.create_subscription(String, TOPIC, on_message, 10)
    return node


def main() -> int:
    role = sys.argv[1]
    factory = {"talk": talker, "listen": listener}[role]
    return spin_node(factory, num_threads=1, name=f"dds_probe_{role}",
                     ready_line="talking" if role == "talk" else "listening")


if __name__ == "__main__":
    sys.exit(main())
