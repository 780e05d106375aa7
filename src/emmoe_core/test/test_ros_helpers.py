"""emmoe_core.ros_helpers against real rclpy: waits, service calls, action goals (time-out and cancel paths
included), and the node process body (parameters from config dataclasses: test_ros_parameters.py)."""

from __future__ import annotations

import threading
import time

import pytest

pytestmark = pytest.mark.ros


@pytest.fixture
def spun(ros_context, ros_node_factory):
    """A server node and a client node spun by a MultiThreadedExecutor in a background thread."""
    from rclpy.executors import MultiThreadedExecutor

    server = ros_node_factory("helpers_server")
    client = ros_node_factory("helpers_client")
    executor = MultiThreadedExecutor(num_threads=4, context=ros_context)
    executor.add_node(server)
    executor.add_node(client)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    yield server, client
    executor.shutdown()
    thread.join(timeout=5)


def serve_trigger(node, delay_s: float = 0.0):
    from rclpy.callback_groups import ReentrantCallbackGroup
    from std_srvs.srv import Trigger

    def answer(request, response):
        time.sleep(delay_s)
        response.success = True
        response.message = "pong"
        return response

    return node.create_service(Trigger, "/helpers/trigger", answer, callback_group=ReentrantCallbackGroup())


def test_wait_for_future_statuses():
    from rclpy.task import Future

    from emmoe_core.ros_helpers import WaitStatus, wait_for_future

    done = Future()
    done.set_result(1)
    assert wait_for_future(done, 0.1) is WaitStatus.DONE
    assert wait_for_future(Future(), 0.1) is WaitStatus.TIMEOUT
    cancel = threading.Event()
    cancel.set()
    assert wait_for_future(Future(), 5.0, cancel) is WaitStatus.CANCELLED
    assert wait_for_future(Future(), 5.0, lambda: True) is WaitStatus.CANCELLED
    later = Future()
    threading.Timer(0.1, lambda: later.set_result(2)).start()
    started = time.monotonic()
    assert wait_for_future(later, 5.0) is WaitStatus.DONE and time.monotonic() - started < 2.0
    assert WaitStatus.DONE == "done"


def test_await_future_and_condition_in_a_coroutine_callback(ros_context, ros_node_factory):
    """Coroutine service callbacks await with a time-out on a SingleThreadedExecutor, blocking no thread."""
    from rclpy.callback_groups import ReentrantCallbackGroup
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.task import Future
    from std_srvs.srv import SetBool

    from emmoe_core.ros_helpers import WaitStatus, await_condition, await_future, call_service

    server = ros_node_factory("await_server")

    async def answer(request, response):
        pending = Future()
        if request.data:
            server.create_timer(0.05, lambda: pending.done() or pending.set_result(True),
                                callback_group=ReentrantCallbackGroup())
        response.message = (await await_future(server, pending, 0.3)).value
        return response

    flag = threading.Event()

    async def condition(request, response):
        if request.data:
            threading.Timer(0.1, flag.set).start()
        response.message = (await await_condition(server, flag.is_set, 0.5)).value
        return response

    server.create_service(SetBool, "/helpers/await", answer)
    server.create_service(SetBool, "/helpers/condition", condition)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(server)
    client_node = ros_node_factory("await_client")
    executor.add_node(client_node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        client = client_node.create_client(SetBool, "/helpers/await")
        done = call_service(client, SetBool.Request(data=True), 5.0, server_wait_s=10.0)
        late = call_service(client, SetBool.Request(data=False), 5.0)
        assert done.ok, done.message
        assert done.response.message == WaitStatus.DONE.value
        assert late.response.message == WaitStatus.TIMEOUT.value
        condition_client = client_node.create_client(SetBool, "/helpers/condition")
        never = call_service(condition_client, SetBool.Request(data=False), 5.0, server_wait_s=10.0)
        met = call_service(condition_client, SetBool.Request(data=True), 5.0)
        assert never.response.message == WaitStatus.TIMEOUT.value
        assert met.response.message == WaitStatus.DONE.value
    finally:
        executor.shutdown()
        thread.join(timeout=5)


def test_topic_names():
    from emmoe_core import topics

    assert topics.skill_action("m3", "navigate") == "/skills/m3/navigate"
    assert topics.camera_topic("left") == "/head_camera/left/image_raw"
    assert topics.camera_topic("back", depth=True) == "/head_camera/back/depth/image_raw"
    assert topics.FINISH_RUNS_SERVICE == "/emmoe_evaluator/finish_runs"
    with pytest.raises(ValueError, match="navigate or manipulate"):
        topics.skill_action("m3", "pick")


def test_call_service_done_timeout_cancel_unavailable(spun):
    from std_srvs.srv import Trigger

    from emmoe_core.ros_helpers import CallStatus, call_service

    server, node = spun
    client = node.create_client(Trigger, "/helpers/trigger")
    missing = call_service(client, Trigger.Request(), 1.0, server_wait_s=0.2)
    assert missing.status is CallStatus.UNAVAILABLE and "/helpers/trigger is not available" in missing.message
    serve_trigger(server, delay_s=0.5)
    outcome = call_service(client, Trigger.Request(), 5.0, server_wait_s=10.0)
    assert outcome.ok and outcome.response.message == "pong" and outcome.message == ""
    slow = call_service(client, Trigger.Request(), 0.1)
    assert slow.status is CallStatus.TIMEOUT and "gave no answer within 0.1 s" in slow.message
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    cancelled = call_service(client, Trigger.Request(), 5.0, cancel)
    assert cancelled.status is CallStatus.CANCELLED


def test_call_service_from_inside_a_callback(spun):
    """The wait blocks a worker thread of the MultiThreadedExecutor, never spins inside the callback."""
    from rclpy.callback_groups import ReentrantCallbackGroup
    from std_srvs.srv import Trigger

    from emmoe_core.ros_helpers import call_service

    server, node = spun
    serve_trigger(server)
    group = ReentrantCallbackGroup()
    client = node.create_client(Trigger, "/helpers/trigger", callback_group=group)
    answers = []
    finished = threading.Event()

    def tick():
        timer.cancel()
        answers.append(call_service(client, Trigger.Request(), 5.0, server_wait_s=10.0))
        finished.set()

    timer = node.create_timer(0.01, tick, callback_group=group)
    assert finished.wait(15.0)
    assert answers[0].ok and answers[0].response.message == "pong"


class Navigator:
    """A Navigate action server whose goals take `delay_s` and stop at a cancel request."""

    def __init__(self, node, delay_s: float = 0.0, accept: bool = True) -> None:
        from emmoe_interfaces.action import Navigate
        from rclpy.action import ActionServer, CancelResponse, GoalResponse
        from rclpy.callback_groups import ReentrantCallbackGroup

        self.delay_s = delay_s
        self.cancelled = threading.Event()
        self.server = ActionServer(
            node, Navigate, "/helpers/navigate", execute_callback=self._execute,
            goal_callback=lambda _goal: GoalResponse.ACCEPT if accept else GoalResponse.REJECT,
            cancel_callback=lambda _goal: CancelResponse.ACCEPT, callback_group=ReentrantCallbackGroup())

    def _execute(self, handle):
        from emmoe_interfaces.action import Navigate

        deadline = time.monotonic() + self.delay_s
        handle.publish_feedback(Navigate.Feedback(distance_remaining=1.5, sim_steps=1))
        while time.monotonic() < deadline:
            if handle.is_cancel_requested:
                self.cancelled.set()
                handle.canceled()
                return Navigate.Result(success=False, error_code=Navigate.Result.CANCELED, error_msg="cancelled")
            time.sleep(0.02)
        handle.succeed()
        return Navigate.Result(success=True, held_object="", sim_steps=7)


def navigate_client(node):
    from emmoe_interfaces.action import Navigate
    from emmoe_core.action_client import ActionClient

    return ActionClient(node, Navigate, "/helpers/navigate")


def test_send_action_goal_succeeds_with_feedback(spun):
    from action_msgs.msg import GoalStatus
    from emmoe_interfaces.action import Navigate

    from emmoe_core.ros_helpers import CallStatus, send_action_goal

    server, node = spun
    Navigator(server, delay_s=0.2)
    feedback = []
    outcome = send_action_goal(navigate_client(node), Navigate.Goal(target="fridge"), 3.0, 10.0,
                               feedback_callback=lambda message: feedback.append(message.feedback),
                               request_tries=3)
    assert outcome.status is CallStatus.DONE and outcome.ok
    assert outcome.result.success and outcome.result.sim_steps == 7
    assert outcome.goal_status == GoalStatus.STATUS_SUCCEEDED and outcome.goal_handle.accepted
    assert feedback and feedback[0].distance_remaining == pytest.approx(1.5)


def test_send_action_goal_timeout_cancels_the_goal(spun):
    from action_msgs.msg import GoalStatus
    from emmoe_interfaces.action import Navigate

    from emmoe_core.ros_helpers import CallStatus, send_action_goal

    server, node = spun
    navigator = Navigator(server, delay_s=30.0)
    outcome = send_action_goal(navigate_client(node), Navigate.Goal(target="fridge"), 3.0, 0.3, request_tries=3)
    assert outcome.status is CallStatus.TIMEOUT
    assert "gave no result within 0.3 s; the goal was cancelled" in outcome.message
    assert navigator.cancelled.is_set()
    assert outcome.result is not None and outcome.result.error_code == Navigate.Result.CANCELED
    assert outcome.goal_status == GoalStatus.STATUS_CANCELED


def test_send_action_goal_cancel_event(spun):
    from emmoe_interfaces.action import Navigate

    from emmoe_core.ros_helpers import CallStatus, send_action_goal

    server, node = spun
    navigator = Navigator(server, delay_s=30.0)
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    outcome = send_action_goal(navigate_client(node), Navigate.Goal(target="fridge"), 3.0, 30.0, cancel,
                               cancel_wait_s=0.0, request_tries=3)
    assert outcome.status is CallStatus.CANCELLED and outcome.goal_handle is not None
    assert navigator.cancelled.wait(5.0)


def test_send_action_goal_rejected_and_unavailable(spun):
    from emmoe_interfaces.action import Navigate

    from emmoe_core.ros_helpers import CallStatus, send_action_goal

    from emmoe_core.action_client import ActionClient

    server, node = spun
    # A name no test serves (a /helpers/navigate server of an earlier test can linger in discovery for a moment).
    missing = send_action_goal(ActionClient(node, Navigate, "/helpers/unserved"), Navigate.Goal(), 0.2, 1.0)
    assert missing.status is CallStatus.UNAVAILABLE and "no action server at /helpers/unserved" in missing.message
    client = navigate_client(node)
    Navigator(server, accept=False)
    rejected = send_action_goal(client, Navigate.Goal(), 3.0, 1.0, request_tries=3)
    assert rejected.status is CallStatus.REJECTED and "rejected the goal" in rejected.message


def test_send_action_goal_resends_an_unanswered_goal_request():
    """A goal request lost right after discovery is sent again; the lost one is cancelled if accepted late."""
    from types import SimpleNamespace

    from rclpy.task import Future

    from emmoe_core.ros_helpers import CallStatus, send_action_goal

    result = Future()
    result.set_result(SimpleNamespace(result="ok", status=4))
    late_cancels = []
    accepted = SimpleNamespace(accepted=True, get_result_async=lambda: result)
    late = SimpleNamespace(accepted=True, cancel_goal_async=lambda: late_cancels.append(True))
    requests = [Future(), Future()]
    requests[1].set_result(accepted)
    client = SimpleNamespace(_action_name="/fake", server_is_ready=lambda: True,
                             send_goal_async=lambda goal, feedback_callback=None: requests.pop(0))
    lost = requests[0]
    outcome = send_action_goal(client, object(), 0.1, 1.0, request_tries=2)
    assert outcome.status is CallStatus.DONE and outcome.result == "ok" and outcome.goal_handle is accepted
    lost.set_result(late)
    assert late_cancels == [True]


def test_private_node_spins_itself(ros_context, ros_node_factory, ros_domain_id):
    """The CLI / runner way: a node in its own context that the caller's thread spins while it waits."""
    from emmoe_interfaces.action import Navigate
    from rclpy.executors import MultiThreadedExecutor
    from std_srvs.srv import Trigger

    from emmoe_core.ros_helpers import call_service, private_node, send_action_goal

    server = ros_node_factory("private_server")
    serve_trigger(server)
    Navigator(server, delay_s=0.1)
    executor = MultiThreadedExecutor(num_threads=2, context=ros_context)
    executor.add_node(server)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        with private_node("private_client", domain_id=ros_domain_id) as private:
            client = private.node.create_client(Trigger, "/helpers/trigger")
            answer = call_service(client, Trigger.Request(), 5.0, server_wait_s=10.0, executor=private.executor)
            assert answer.ok and answer.response.message == "pong"
            outcome = send_action_goal(navigate_client(private.node), Navigate.Goal(target="sink"), 3.0, 10.0,
                                       request_tries=3, executor=private.executor)
            assert outcome.ok and outcome.result.success
        assert not private.context.ok()
    finally:
        executor.shutdown()
        thread.join(timeout=5)


# ---- the node process body -------------------------------------------------------------------------------------
def test_spin_node_config_error_exits_2(ros_domain_id, capsys):
    from emmoe_core.ros_helpers import spin_node

    def broken():
        raise ValueError("rate_hz must be positive")

    assert spin_node(broken, args=[], name="demo_node") == 2
    assert "demo_node: error: rate_hz must be positive" in capsys.readouterr().err


def test_spin_node_spins_until_shutdown(ros_domain_id, capsys):
    import rclpy
    from rclpy.node import Node

    from emmoe_core.ros_helpers import spin_node

    events = []

    class Demo(Node):
        def __init__(self) -> None:
            super().__init__("spin_demo")
            self.create_timer(0.05, self.stop)

        def stop(self) -> None:
            events.append("ticked")
            rclpy.shutdown()

        def destroy_node(self) -> None:
            events.append("destroyed")
            super().destroy_node()

    assert spin_node(Demo, args=[], num_threads=1, ready_line="demo ready",
                     on_shutdown=lambda: events.append("closed")) == 0
    assert "demo ready" in capsys.readouterr().out
    assert events[0] == "ticked" and events[-2:] == ["closed", "destroyed"]
    assert not rclpy.ok()
