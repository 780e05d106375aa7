"""The shared entry-point body of this package's single-node processes (executor_node, monitor_node)."""

from __future__ import annotations

import sys
from collections.abc import Callable

import rclpy
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.node import Node


def spin_node(program: str, make_node: Callable[[], Node], make_executor: Callable[[], Executor], ready_line: str,
              args: list[str] | None = None) -> int:
    """Init rclpy, build the node, print `ready_line`, spin until Ctrl-C or shutdown, clean up.

    A ValueError while building the node (a bad parameter) is printed as one line and gives exit status 2.
    """
    rclpy.init(args=args)
    node = None
    try:
        node = make_node()
        executor = make_executor()
        executor.add_node(node)
        print(ready_line, flush=True)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ValueError as error:  # a bad parameter: one line, no traceback
        print(f"{program}: error: {error}", file=sys.stderr)
        return 2
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0
