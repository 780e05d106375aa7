"""`ActionClient`: rclpy's action client with a goal request that is always answered. Every node and client of this
project creates its action clients from here.

rclpy 9.1.2 (the ROS 2 Kilted wheel) registers a goal request's future under the client's lock and then a second,
fresh future for the same request after the lock (a backport of ros2/rclpy#1308 that left the old lines in place).
When the executor thread takes the server's answer between the two registrations, it completes the first future, the
pending entry goes, and the future handed back is registered anew and never completes: a `/subtask` goal "never
answered", seen about once in a few hundred goals. This subclass registers one future, under the lock, before the
answer can be taken.

The same rclpy adds a new client to its node's waitables before it creates the client's lock. An executor spinning
the node in another thread may call `get_num_entities()` in that gap; the AttributeError then ends the executor's
thread, and no goal of that node is ever answered again. That was seen in the test suite under load. Here the lock
exists before the client is registered, and stays the one lock of the client.
"""

from __future__ import annotations

import threading
from typing import Any

from rclpy.action import ActionClient as _RclpyActionClient
from rclpy.task import Future


class ActionClient(_RclpyActionClient):  # type: ignore[misc]
    """rclpy.action.ActionClient whose `send_goal_async` registers exactly one future per goal request, and whose
    lock exists before the client is added to its node."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As rclpy's (node, action type, action name, ...)."""
        self._lock = threading.Lock()
        super().__init__(*args, **kwargs)

    @property
    def _lock(self) -> threading.Lock:
        return self.__dict__["_one_lock"]  # type: ignore[no-any-return]

    @_lock.setter
    def _lock(self, lock: threading.Lock) -> None:
        """The first lock set stays: rclpy's __init__ would replace it while an executor may be holding it."""
        self.__dict__.setdefault("_one_lock", lock)

    def send_goal_async(self, goal: Any, feedback_callback: Any = None, goal_uuid: Any = None) -> Future:
        """Send a goal; the future completes with the ClientGoalHandle once the server has answered."""
        if not isinstance(goal, self._action_type.Goal):
            raise TypeError(f"expected a {self._action_type.Goal.__name__} goal, got {type(goal).__name__}")
        request = self._action_type.Impl.SendGoalService.Request()
        request.goal_id = self._generate_random_uuid() if goal_uuid is None else goal_uuid
        request.goal = goal
        if feedback_callback is not None:  # feedback may arrive as soon as the server accepts
            self._feedback_callbacks[bytes(request.goal_id.uuid)] = feedback_callback
        future: Future = Future()
        with self._lock:
            sequence_number = self._client_handle.send_goal_request(request)
            if sequence_number in self._pending_goal_requests:
                raise RuntimeError(f"goal request sequence number {sequence_number} is already pending")
            self._pending_goal_requests[sequence_number] = future
            self._goal_sequence_number_to_goal_id[sequence_number] = request.goal_id
            future.add_done_callback(self._remove_pending_goal_request)
            self.add_future(future)
        return future
