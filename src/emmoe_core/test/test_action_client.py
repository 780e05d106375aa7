"""The project's ActionClient registers one future per goal request (rclpy 9.1.2's registers two, see the module)."""

from __future__ import annotations

import threading

import pytest
from emmoe_interfaces.action import Navigate
from rclpy.action import ActionClient as RclpyActionClient

from emmoe_core.action_client import ActionClient


def _send_one_goal(node, client_type):
    """(the future send_goal_async returned, the pending futures, the futures the executor waits on)."""
    client = client_type(node, Navigate, "/nobody/serves/this")
    try:
        future = client.send_goal_async(Navigate.Goal(), feedback_callback=lambda _feedback: None)
        return future, list(client._pending_goal_requests.values()), [item for item in client._futures]
    finally:
        client.destroy()


@pytest.mark.ros
def test_a_goal_request_registers_the_future_it_returns_and_no_other(ros_node_factory):
    future, pending, waited_on = _send_one_goal(ros_node_factory("one_future_client"), ActionClient)
    assert pending == [future] and waited_on == [future]


@pytest.mark.ros
def test_rclpy_still_registers_a_second_future(ros_node_factory):
    """The defect the subclass works around; when this fails, rclpy is fixed and emmoe_core.action_client can go."""
    future, pending, waited_on = _send_one_goal(ros_node_factory("two_futures_client"), RclpyActionClient)
    assert pending == [future] and len(waited_on) == 2 and waited_on[1] is future


def _register_as_an_executor_would(node, client_type):
    """Create a client on a node whose add_waitable asks the new waitable for its entities at once, as an executor
    spinning in another thread may do right then; returns the error that raised, or None."""
    registered = node.add_waitable

    def add_waitable(waitable):
        registered(waitable)
        waitable.get_num_entities()

    node.add_waitable = add_waitable
    try:
        client_type(node, Navigate, "/nobody/serves/this").destroy()
    except AttributeError as error:
        return error
    return None


@pytest.mark.ros
def test_a_client_can_be_asked_for_its_entities_as_soon_as_it_is_registered(ros_node_factory):
    assert _register_as_an_executor_would(ros_node_factory("registered_client"), ActionClient) is None
    client = ActionClient(ros_node_factory("one_lock_client"), Navigate, "/nobody/serves/this")
    try:
        first = client._lock
        client._lock = threading.Lock()  # what rclpy's __init__ does after registering: the first lock stays
        assert client._lock is first
    finally:
        client.destroy()


@pytest.mark.ros
def test_rclpy_still_registers_a_client_before_its_lock(ros_node_factory):
    """The defect behind the lock fix; when this fails, rclpy creates the lock first and the fix can go."""
    error = _register_as_an_executor_would(ros_node_factory("unlocked_client"), RclpyActionClient)
    assert error is not None and "_lock" in str(error)
