"""The ROS 2 plumbing every node and client of the stack shares: spin a node, wait on a future, call a service or an
action, declare a config dataclass's fields as parameters.

- `spin_node(factory)`: the whole body of a node process's `main()` (init, build, spin, clean up; a bad parameter is
  one line on stderr and exit status 2).
- `wait_for_future(future, timeout_s, cancel)`: block until a future completes, times out or is cancelled. Two
  ways: from a callback of a MultiThreadedExecutor (or any thread while another one spins the node) it only blocks;
  given `executor=`, the calling thread spins that executor itself (a private client node of the CLI or the runner).
- `await_future(node, future, timeout_s)` / `await_condition(node, ready, timeout_s)`: the same inside an
  `async def` callback, blocking no thread (for a SingleThreadedExecutor).
- `call_service` / `send_action_goal`: one request or goal with time-outs and cancellation, answered as an outcome
  with a status and a message that says what went wrong (a goal is cancelled on time-out or cancel).
- `declare_config(node, ConfigType)`: one parameter per field of a config dataclass (nested dataclasses are
  flattened), read back into the dataclass so that its `__post_init__` validation runs (from
  emmoe_core.ros_parameters, re-exported here so that a node needs this one import).
- `private_node(name)`: a client node in its own rclpy context, with an executor for `executor=`.

Both starters refuse to start a node unless its DDS traffic stays on this machine (emmoe_core.dds_guard): spin_node
prints the guard's message and returns 2, private_node raises DiscoveryNotConfined.

A cancel is a `threading.Event` or any callable returning True once the wait should stop (e.g.
`lambda: goal_handle.is_cancel_requested`).
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Union

import rclpy
from action_msgs.msg import GoalStatus
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.context import Context
from rclpy.exceptions import ParameterException
from rclpy.executors import Executor, ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.task import Future

from emmoe_core.dds_guard import DiscoveryNotConfined, discovery_problem, require_loopback_dds
from emmoe_core.node_exit import EXIT_GRACE_S, StopWatch, threads_left
from emmoe_core.ros_parameters import ROS_PARAMETER, ParameterSpec, declare_config

__all__ = [
    "CONFIG_ERRORS", "DISCOVERY_GRACE_S", "ROS_PARAMETER", "ActionOutcome", "CallStatus", "Cancel",
    "DiscoveryNotConfined", "ParameterSpec", "PrivateNode", "ServiceOutcome", "WaitStatus", "await_condition", "await_future", "call_service",
    "cancel_requested", "declare_config", "private_node", "send_action_goal", "spin_node",
    "wait_for_future", "wait_until",
]

Cancel = Union[threading.Event, Callable[[], bool], None]
# What spin_node reports as a configuration error (exit status 2) rather than a crash.
CONFIG_ERRORS: tuple[type[BaseException], ...] = (ValueError, OSError, ParameterException)




class WaitStatus(str, enum.Enum):
    """How a wait ended."""

    DONE = "done"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


class CallStatus(str, enum.Enum):
    """How a service call or an action goal ended."""

    DONE = "done"
    UNAVAILABLE = "unavailable"
    REJECTED = "rejected"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


@dataclasses.dataclass(frozen=True)
class ServiceOutcome:
    """The answer to `call_service`.

    Attributes:
        status: DONE (response holds the answer), UNAVAILABLE, TIMEOUT or CANCELLED.
        response: the response message (None unless DONE).
        message: what went wrong, naming the service ("" when DONE).
    """

    status: CallStatus
    response: Any = None
    message: str = ""

    @property
    def ok(self) -> bool:
        """Whether the service answered."""
        return self.status is CallStatus.DONE


@dataclasses.dataclass(frozen=True)
class ActionOutcome:
    """The answer to `send_action_goal`.

    Attributes:
        status: DONE (the goal ended: see goal_status and result), UNAVAILABLE (no server), REJECTED (or the goal
            request went unanswered: goal_handle is None then), TIMEOUT (no result in time) or CANCELLED (the
            caller's cancel); the goal was cancelled in the last two cases.
        result: the action's Result message; after a time-out or cancel, the result the server gave on cancelling
            (None when it did not stop within cancel_wait_s).
        goal_status: action_msgs/GoalStatus code of the ended goal (STATUS_UNKNOWN without a result).
        goal_handle: the client goal handle once accepted.
        message: what went wrong, naming the action ("" when DONE).
    """

    status: CallStatus
    result: Any = None
    goal_status: int = GoalStatus.STATUS_UNKNOWN
    goal_handle: Any = None
    message: str = ""

    @property
    def ok(self) -> bool:
        """Whether the goal ran to its end (successfully or not: see result)."""
        return self.status is CallStatus.DONE


# ---- processes -------------------------------------------------------------------------------------------------
def spin_node(node_factory: Callable[[], Node | Sequence[Node]], args: list[str] | None = None, num_threads: int = 4,
              name: str = "node", *, ready_line: str = "", on_shutdown: Callable[[], None] | None = None,
              config_errors: tuple[type[BaseException], ...] = CONFIG_ERRORS) -> int:
    """The body of a node process's `main()`: init rclpy, build the node(s), spin until Ctrl-C or shutdown.

    Args:
        node_factory: builds the node, or several nodes spun by one executor (called after rclpy.init).
        args: command-line arguments for rclpy.init (ROS arguments such as --ros-args -p x:=1).
        num_threads: threads of the MultiThreadedExecutor; 1 spins a SingleThreadedExecutor.
        name: the program name in error messages.
        ready_line: printed (flushed) once the nodes spin; "" prints nothing.
        on_shutdown: called after spinning stops (also when building failed), before the nodes are destroyed: to
            finish open work or clean up what the factory made (a closure over what the factory built).
        config_errors: exceptions of node_factory that are a bad configuration: `<name>: error: <message>` on
            stderr and exit status 2 instead of a traceback.

    Returns:
        0 after a normal shutdown, 2 after a configuration error or when DDS traffic could leave this machine (the
        node does not start: emmoe_core.dds_guard).

    Once told to stop (Ctrl-C, SIGTERM, shutdown), the process ends within EXIT_GRACE_S (plus STOP_POLL_S) even when
    a callback is still blocked (a skill waiting for its server) or the executor missed the stop: the clean-up gets
    that long, then the process exits. The countdown starts when the context is shut down (emmoe_core.node_exit), not when
    spinning returns.
    """
    problem = discovery_problem()
    if problem is not None:
        print(f"{name}: error: {problem}", file=sys.stderr, flush=True)
        return 2
    rclpy.init(args=args)
    nodes: list[Node] = []
    executor: Executor | None = None
    watch = StopWatch(name, rclpy.get_default_context())
    try:
        built = node_factory()
        nodes = [built] if isinstance(built, Node) else list(built)
        executor = SingleThreadedExecutor() if num_threads <= 1 else MultiThreadedExecutor(num_threads=num_threads)
        for node in nodes:
            executor.add_node(node)
        watch.executor = executor
        if ready_line:
            print(ready_line, flush=True)
        executor.spin()
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except config_errors as error:
        if nodes:  # raised while spinning: not a configuration error
            raise
        print(f"{name}: error: {error}", file=sys.stderr)
        return 2
    finally:
        watchdog = watch.stop()
        if executor is not None:
            executor.shutdown(timeout_sec=EXIT_GRACE_S / 4)
        if on_shutdown is not None:
            on_shutdown()
        for node in reversed(nodes):
            node.destroy_node()
        rclpy.try_shutdown()
        if not threads_left(timeout_s=EXIT_GRACE_S / 4):
            watchdog.cancel()  # nothing can keep the process from ending: a caller in-process goes on
    return 0


@dataclasses.dataclass
class PrivateNode:
    """A client node in a context of its own (see `private_node`)."""

    node: Node
    executor: SingleThreadedExecutor
    context: Context


@contextmanager
def private_node(name: str, domain_id: int | None = None) -> Iterator[PrivateNode]:
    """A client node in its own rclpy context, spun by nobody: pass `executor=private.executor` to the waits.

    Args:
        name: the node name.
        domain_id: ROS domain (None: ROS_DOMAIN_ID).

    Raises:
        DiscoveryNotConfined: DDS traffic could leave this machine with this environment (emmoe_core.dds_guard).
    """
    require_loopback_dds()
    context = Context()
    if domain_id is None:
        rclpy.init(context=context)
    else:
        rclpy.init(context=context, domain_id=domain_id)
    node = None
    executor = SingleThreadedExecutor(context=context)
    try:
        node = rclpy.create_node(name, context=context)
        executor.add_node(node)
        yield PrivateNode(node, executor, context)
    finally:
        executor.shutdown()
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown(context=context)


# ---- waiting ---------------------------------------------------------------------------------------------------
def cancel_requested(cancel: Cancel) -> bool:
    """Whether `cancel` (an Event, a predicate or None) asks to stop."""
    if cancel is None:
        return False
    if isinstance(cancel, threading.Event):
        return cancel.is_set()
    return bool(cancel())


def wait_for_future(future: Any, timeout_s: float | None, cancel: Cancel = None, poll_s: float = 0.05,
                    executor: Executor | None = None) -> WaitStatus:
    """Block until `future` is done, `timeout_s` passed, or `cancel` asks to stop (checked every poll_s).

    Without `executor` the future must be completed by an executor spinning in another thread: call this from a
    callback of a MultiThreadedExecutor in a reentrant group (it never spins inside the callback), or while a
    background thread spins the node. With `executor`, the calling thread spins it until the future is done (a
    private client node that nobody else spins).

    Args:
        future: an rclpy Future (or anything with done() and add_done_callback()).
        timeout_s: seconds to wait; None waits without limit.
        cancel: stops the wait early (WaitStatus.CANCELLED).
        poll_s: how often cancel and the deadline are checked.
        executor: the executor to spin while waiting.
    """
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    finished = threading.Event()
    if executor is None:
        future.add_done_callback(lambda _future: finished.set())
    while not future.done():
        if cancel_requested(cancel):
            return WaitStatus.CANCELLED
        remaining = poll_s if deadline is None else deadline - time.monotonic()
        if remaining <= 0:
            return WaitStatus.TIMEOUT
        if executor is None:
            finished.wait(min(poll_s, remaining))
        else:
            executor.spin_once(timeout_sec=min(poll_s, remaining))
    return WaitStatus.DONE


async def await_future(node: Node, future: Any, timeout_s: float) -> WaitStatus:
    """In a coroutine callback (`async def`): await `future` for at most `timeout_s` without blocking any executor
    thread (a one-shot timer of `node` ends the wait). DONE or TIMEOUT."""
    settled: Future[WaitStatus] = Future()

    def settle(status: WaitStatus) -> None:  # the first of answer and time-out decides
        if not settled.done():
            settled.set_result(status)

    future.add_done_callback(lambda _future: settle(WaitStatus.DONE))
    # A group of its own: the awaiting callback's group may be mutually exclusive (and busy until the wait ends).
    timer = node.create_timer(timeout_s, lambda: settle(WaitStatus.TIMEOUT),
                              callback_group=MutuallyExclusiveCallbackGroup())
    try:
        if future.done():
            return WaitStatus.DONE
        return WaitStatus(await settled)
    finally:
        node.destroy_timer(timer)


async def await_condition(node: Node, ready: Callable[[], bool], timeout_s: float,
                          poll_s: float = 0.05) -> WaitStatus:
    """In a coroutine callback: await `ready()` turning true (e.g. a server's discovery) for at most `timeout_s`,
    checked every `poll_s` by a timer of `node`, blocking no thread. DONE or TIMEOUT."""
    if ready():
        return WaitStatus.DONE
    settled: Future[WaitStatus] = Future()
    deadline = time.monotonic() + timeout_s

    def check() -> None:
        if settled.done():
            return
        if ready():
            settled.set_result(WaitStatus.DONE)
        elif time.monotonic() >= deadline:
            settled.set_result(WaitStatus.TIMEOUT)

    timer = node.create_timer(poll_s, check, callback_group=MutuallyExclusiveCallbackGroup())
    try:
        return WaitStatus(await settled)
    finally:
        node.destroy_timer(timer)


def wait_until(ready: Callable[[], bool], timeout_s: float, cancel: Cancel = None, poll_s: float = 0.05) -> WaitStatus:
    """Poll `ready()` until it is true (DONE), `timeout_s` passes or `cancel` asks to stop (e.g. server discovery)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if cancel_requested(cancel):
            return WaitStatus.CANCELLED
        if time.monotonic() >= deadline:
            return WaitStatus.TIMEOUT
        time.sleep(poll_s)
    return WaitStatus.DONE


def spin_until(executor: Executor, ready: Callable[[], bool], timeout_s: float, cancel: Cancel = None,
               poll_s: float = 0.1) -> WaitStatus:
    """Spin `executor` in this thread until `ready()` is true (DONE), `timeout_s` passes or `cancel` asks to stop
    (for client nodes that nobody else spins, e.g. waiting for a message on a subscription)."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if cancel_requested(cancel):
            return WaitStatus.CANCELLED
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return WaitStatus.TIMEOUT
        executor.spin_once(timeout_sec=min(poll_s, remaining))
    return WaitStatus.DONE


def call_service(client: Any, request: Any, timeout_s: float, cancel: Cancel = None, server_wait_s: float = 5.0,
                 executor: Executor | None = None, poll_s: float = 0.05) -> ServiceOutcome:
    """Call a service once and wait for its response (see wait_for_future for the two ways of waiting).

    Args:
        client: an rclpy service client.
        request: the request message.
        timeout_s: seconds to wait for the response (the request is dropped then).
        cancel: stops waiting (for the server or the response).
        server_wait_s: seconds to wait for the server to appear.
        executor: the executor to spin while waiting (private client nodes).
        poll_s: how often cancel and deadlines are checked.
    """
    service = client.srv_name
    found = wait_until(client.service_is_ready, server_wait_s, cancel, poll_s)
    if found is WaitStatus.CANCELLED:
        return ServiceOutcome(CallStatus.CANCELLED, message=f"cancelled while waiting for {service}")
    if found is WaitStatus.TIMEOUT:
        return ServiceOutcome(CallStatus.UNAVAILABLE, message=f"service {service} is not available")
    future = client.call_async(request)
    status = wait_for_future(future, timeout_s, cancel, poll_s, executor)
    if status is not WaitStatus.DONE:
        client.remove_pending_request(future)
        if status is WaitStatus.CANCELLED:
            return ServiceOutcome(CallStatus.CANCELLED, message=f"cancelled while waiting for {service}")
        return ServiceOutcome(CallStatus.TIMEOUT, message=f"{service} gave no answer within {timeout_s:g} s")
    return ServiceOutcome(CallStatus.DONE, future.result())


# Discovery is not symmetric: when a client first sees a server, the server may not see the client yet, and a request
# sent at once can be accepted with its answer lost (Fast DDS: "failed to send response"). A client waits this long
# after it first sees a server.
DISCOVERY_GRACE_S = 1.0


def send_action_goal(client: Any, goal: Any, accept_timeout_s: float, result_timeout_s: float | None,
                     cancel: Cancel = None, feedback_callback: Callable[[Any], None] | None = None, *,
                     server_wait_s: float | None = None, cancel_wait_s: float = 5.0, request_tries: int = 1,
                     executor: Executor | None = None, poll_s: float = 0.05) -> ActionOutcome:
    """Send one goal and wait for its result; the goal is cancelled on time-out, on `cancel` and on Ctrl-C.

    Args:
        client: an rclpy ActionClient.
        goal: the goal message.
        accept_timeout_s: seconds to wait for the server to accept or reject the goal (per request).
        result_timeout_s: seconds to wait for the result once accepted (None: no limit).
        cancel: stops waiting; the goal is cancelled (CallStatus.CANCELLED).
        feedback_callback: called with each feedback message (the FeedbackMessage: its `.feedback` is the action's
            Feedback).
        server_wait_s: seconds to wait for the server to appear (None: accept_timeout_s); a server that was not
            there at the call waits DISCOVERY_GRACE_S more once it appears.
        cancel_wait_s: after cancelling, seconds to wait for the server's final result (0: do not wait).
        request_tries: goal requests sent before giving up on an answer. Right after discovery Fast DDS may lose
            one; more than 1 suits servers that accept concurrent goals (a late-accepted duplicate is cancelled).
        executor: the executor to spin while waiting (private client nodes).
        poll_s: how often cancel and deadlines are checked.

    Raises:
        KeyboardInterrupt: re-raised after cancelling the goal.
    """
    action = getattr(client, "_action_name", "the action server")
    if not client.server_is_ready():
        found = wait_until(client.server_is_ready, accept_timeout_s if server_wait_s is None else server_wait_s,
                           cancel, poll_s)
        if found is WaitStatus.TIMEOUT:
            return ActionOutcome(CallStatus.UNAVAILABLE, message=f"no action server at {action}")
        if found is WaitStatus.DONE:  # just discovered: let the server discover this client too
            found = wait_until(lambda: False, DISCOVERY_GRACE_S, cancel, poll_s)
        if found is WaitStatus.CANCELLED:
            return ActionOutcome(CallStatus.CANCELLED, message=f"cancelled while waiting for {action}")
    for _ in range(max(1, request_tries)):
        sent = client.send_goal_async(goal, feedback_callback=feedback_callback)
        status = wait_for_future(sent, accept_timeout_s, cancel, poll_s, executor)
        if status is not WaitStatus.TIMEOUT:
            break
        sent.add_done_callback(_cancel_if_accepted)  # the goal must not run on unattended when accepted late
    if status is WaitStatus.CANCELLED:
        sent.add_done_callback(_cancel_if_accepted)
        return ActionOutcome(CallStatus.CANCELLED, message=f"cancelled while {action} considered the goal")
    if status is WaitStatus.TIMEOUT:
        return ActionOutcome(CallStatus.REJECTED,
                             message=f"{action} did not answer the goal request within {accept_timeout_s:g} s")
    handle = sent.result()
    if handle is None or not handle.accepted:
        return ActionOutcome(CallStatus.REJECTED, goal_handle=handle,
                             message=f"{action} rejected the goal (busy with another one?)")
    result_future = handle.get_result_async()
    try:
        status = wait_for_future(result_future, result_timeout_s, cancel, poll_s, executor)
    except KeyboardInterrupt:
        _cancel_and_wait(handle, result_future, cancel_wait_s, poll_s, executor)
        raise
    if status is WaitStatus.DONE:
        response = result_future.result()
        return ActionOutcome(CallStatus.DONE, response.result, response.status, handle)
    stopped = _cancel_and_wait(handle, result_future, cancel_wait_s, poll_s, executor)
    response = result_future.result() if stopped else None
    if status is WaitStatus.CANCELLED:
        outcome, message = CallStatus.CANCELLED, f"cancelled; the goal on {action} was cancelled"
    else:
        outcome, message = (CallStatus.TIMEOUT,
                            f"{action} gave no result within {result_timeout_s:g} s; the goal was cancelled")
    if cancel_wait_s > 0 and not stopped:
        message += f" but did not stop within {cancel_wait_s:g} s"
    return ActionOutcome(outcome, response.result if response else None,
                         response.status if response else GoalStatus.STATUS_UNKNOWN, handle, message)


def _cancel_if_accepted(sent: Any) -> None:
    handle = sent.result()
    if handle is not None and handle.accepted:
        handle.cancel_goal_async()


def _cancel_and_wait(handle: Any, result_future: Any, cancel_wait_s: float, poll_s: float,
                     executor: Executor | None) -> bool:
    """Cancel the goal; whether its result arrived within cancel_wait_s."""
    handle.cancel_goal_async()
    if cancel_wait_s <= 0:
        return bool(result_future.done())
    return wait_for_future(result_future, cancel_wait_s, None, poll_s, executor) is WaitStatus.DONE
