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

rclpy also forgets a goal's feedback callback as soon as its result arrives, and its wait-set cycle hands the client a
result before a feedback message taken in the same cycle: the server's last feedback, sent just before its result,
was dropped whenever both arrived together (seen in the suite on a loaded machine). Here a finished goal's callback
is kept (the newest KEPT_FEEDBACK_CALLBACKS of them), so that feedback still reaches it, in order, before the caller
sees the result.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from rclpy.action import ActionClient as _RclpyActionClient
from rclpy.task import Future

# Finished goals whose feedback callbacks are kept for feedback that arrives with (or just after) the result.
KEPT_FEEDBACK_CALLBACKS = 32


class ActionClient(_RclpyActionClient):  # type: ignore[misc]
    """rclpy.action.ActionClient whose `send_goal_async` registers exactly one future per goal request, and whose
    lock exists before the client is added to its node."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As rclpy's (node, action type, action name, ...)."""
        self._lock = threading.Lock()
        self._finished_goals: deque[bytes] = deque()
        super().__init__(*args, **kwargs)

    @property
    def _lock(self) -> threading.Lock:
        return self.__dict__["_one_lock"]  # type: ignore[no-any-return]

    @_lock.setter
    def _lock(self, lock: threading.Lock) -> None:
        """The first lock set stays: rclpy's __init__ would replace it while an executor may be holding it."""
        self.__dict__.setdefault("_one_lock", lock)

    def _remove_pending_result_request(self, future: Future) -> None:
        """As rclpy's, but the goal's feedback callback stays until KEPT_FEEDBACK_CALLBACKS newer goals have ended."""
        sequence_number = self._remove_pending_request(future, self._pending_result_requests)
        goal_id = self._result_sequence_number_to_goal_id.pop(sequence_number, None)
        if goal_id is not None and bytes(goal_id.uuid) in self._feedback_callbacks:
            self._finished_goals.append(bytes(goal_id.uuid))
            while len(self._finished_goals) > KEPT_FEEDBACK_CALLBACKS:
                self._feedback_callbacks.pop(self._finished_goals.popleft(), None)

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
