"""The planner node against a test simulator (/sim/get_observation, /sim/reset_episode) and a test executor
(/subtask) speaking the real interfaces, with the mock, expert, openai-stub and (slow) smollm2 backends."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from emmoe_core.names import default_alias_table
from emmoe_eval.dataset import read_keypaths
from emmoe_eval.metrics import KeypathMatcher, NameIndex
from emmoe_eval.records import is_end_marker, step_from_record

pytestmark = pytest.mark.ros

GO = "Analysis: the fridge is ahead.\nSubtask: [Go to, fridge]\nModel: NoMaD"
OPEN = "Analysis: open it.\nSubtask: [Open, fridge]\nModel: octo"
PICK = "Analysis: take the apple.\nSubtask: [Pick, apple]\nModel: RT-1-X"
END = "Analysis: done.\nSubtask: [End]\nModel: None"
FAR = "Unable to open, the target is far away"


def _wait(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def _result_of(future: Any, timeout: float = 30.0) -> Any:
    _wait(future.done, timeout)
    return future.result()


@dataclass
class World:
    """The test simulator and executor, with what they received."""

    resets: list[tuple[str, str]] = field(default_factory=list)  # (scene_path, run_key)
    observations: int = 0
    goals: list[Any] = field(default_factory=list)
    # Outcomes of successive /subtask goals: (success, error_code, error_type, feedback) or "hang".
    outcomes: list[Any] = field(default_factory=list)
    cancelled_goals: int = 0
    records: list[Any] = field(default_factory=list)
    inventory: list[str] = field(default_factory=list)
    # Privileged scenes served by /sim/query_scene, one per query (the last one repeats).
    scenes: list[Any] = field(default_factory=list)


class Graph:
    """A planner node and the test servers in one context, spun by one MultiThreadedExecutor."""

    def __init__(self, context: Any, make_node: Callable[..., Any]) -> None:
        from emmoe_interfaces.action import ExecuteSubtask, RunTask
        from emmoe_interfaces.msg import StepRecord, VisibleObjects
        from emmoe_interfaces.srv import GetObservation, QueryScene, ResetEpisode
        from emmoe_core.action_client import ActionClient
        from emmoe_core.robot.messages import snapshot_to_query
        from rclpy.action import ActionServer, CancelResponse
        from rclpy.callback_groups import ReentrantCallbackGroup
        from rclpy.executors import MultiThreadedExecutor
        from sensor_msgs.msg import Image

        self.context = context
        self.world = world = World()
        self.RunTask = RunTask
        group = ReentrantCallbackGroup()
        servers = make_node("test_world")
        self._stop = threading.Event()

        def image(shade: int) -> Image:
            return Image(height=16, width=16, encoding="rgb8", step=48, data=bytes([shade]) * (16 * 16 * 3))

        def observe(request: Any, response: Any) -> Any:
            world.observations += 1
            response.success = True
            response.front, response.left, response.back, response.right = (image(10), image(20), image(30),
                                                                            image(40))
            response.visible = [VisibleObjects(view="front", names=["frl_apartment_refrigerator", "013_apple"]),
                                VisibleObjects(view="back", names=["frl_apartment_sofa"])]
            response.inventory = list(world.inventory)
            return response

        def reset(request: Any, response: Any) -> Any:
            world.resets.append((request.scene_path, request.run_key))
            response.success = True
            response.episode_id = "reset"
            return response

        def execute(goal_handle: Any) -> Any:
            world.goals.append(goal_handle.request)
            outcome = world.outcomes.pop(0) if world.outcomes else (True, 0, "", "None")
            result = ExecuteSubtask.Result()
            if outcome == "hang":
                while not goal_handle.is_cancel_requested and not self._stop.is_set():
                    time.sleep(0.02)
                world.cancelled_goals += 1
                goal_handle.canceled()
                result.error_code = ExecuteSubtask.Result.CANCELED
                return result
            result.success, result.error_code, result.error_type, result.feedback = outcome
            if result.success and goal_handle.request.subtask.action == "Pick":
                world.inventory.append(goal_handle.request.subtask.target)
            result.inventory = list(world.inventory)
            goal_handle.succeed()
            return result

        def query(request: Any, response: Any) -> Any:
            scene = world.scenes.pop(0) if len(world.scenes) > 1 else world.scenes[0]
            return snapshot_to_query(scene, response)

        servers.create_service(GetObservation, "/sim/get_observation", observe, callback_group=group)
        servers.create_service(QueryScene, "/sim/query_scene", query, callback_group=group)
        servers.create_service(ResetEpisode, "/sim/reset_episode", reset, callback_group=group)
        self._executor_server = ActionServer(servers, ExecuteSubtask, "/subtask", execute_callback=execute,
                                             cancel_callback=lambda _goal: CancelResponse.ACCEPT,
                                             callback_group=group)
        servers.create_subscription(StepRecord, "/emmoe/steps", world.records.append, 100, callback_group=group)
        self.client_node = make_node("test_client")
        self.client = ActionClient(self.client_node, RunTask, "/emmoe/run_task", callback_group=group)
        self.executor = MultiThreadedExecutor(num_threads=6, context=context)
        self.executor.add_node(servers)
        self.executor.add_node(self.client_node)
        self.planner: Any = None
        self._thread = threading.Thread(target=self.executor.spin, daemon=True)
        self._thread.start()

    def start_planner(self, **parameters: Any) -> Any:
        from rclpy.parameter import Parameter

        from homiebot_planner.planner_node import PlannerNode

        overrides = [Parameter(name, value=value) for name, value in
                     {"server_wait_s": 5.0, "observation_timeout_s": 5.0, **parameters}.items()]
        self.planner = PlannerNode(context=self.context, parameter_overrides=overrides)
        self.executor.add_node(self.planner)
        assert self.client.wait_for_server(timeout_sec=10.0)
        return self.planner

    def send(self, task_id: str = "", instruction: str = "put the apple in the fridge", max_steps: int = 0,
             feedback: list[Any] | None = None) -> Any:
        goal = self.RunTask.Goal(task_id=task_id, instruction=instruction, run_index=2, max_steps=max_steps)
        callback = (lambda message: feedback.append(message.feedback.latest)) if feedback is not None else None
        # Right after discovery across processes Fast DDS may drop the first request: send again until answered.
        for _attempt in range(10):
            future = self.client.send_goal_async(goal, feedback_callback=callback)
            try:
                _wait(future.done, 2.0)
            except AssertionError:
                continue
            handle = future.result()
            assert handle.accepted
            return handle
        raise AssertionError("the planner never answered the goal request")

    def run(self, **kwargs: Any) -> Any:
        return _result_of(self.send(**kwargs).get_result_async(), 60.0).result

    def close(self) -> None:
        self._stop.set()
        self.executor.shutdown()
        if self.planner is not None:
            self.planner.destroy_node()
        self._thread.join(timeout=5)


@pytest.fixture
def graph(ros_context: Any, ros_node_factory: Callable[..., Any]) -> Iterator[Graph]:
    built = Graph(ros_context, ros_node_factory)
    yield built
    built.close()


def test_mock_run_end_to_end(graph: Graph, tmp_path: Path) -> None:
    graph.start_planner(backend="mock", mock_outputs=[GO, OPEN, "no idea", PICK, END],
                        conversation_dir=str(tmp_path / "conv"))
    graph.world.outcomes = [(True, 0, "", "None"), (False, 7, "D1", FAR), (True, 0, "", "None")]
    feedback: list[Any] = []
    handle = graph.send(feedback=feedback)
    result = _result_of(handle.get_result_async(), 60.0).result
    assert (result.success, result.error_code, result.steps) == (True, 0, 4)
    assert result.episode_id.startswith("free-")
    sent = [(goal.subtask.action, goal.subtask.target, goal.subtask.model, list(goal.inventory))
            for goal in graph.world.goals]
    assert sent == [("Go to", "fridge", "NoMaD", []), ("Open", "fridge", "octo", []), ("Pick", "apple", "RT-1-X", [])]
    _wait(lambda: len(graph.world.records) == 4)
    records = graph.world.records
    assert [record.step for record in records] == [1, 2, 3, 4]
    assert [record.success for record in records] == [True, False, True, True]
    assert [record.feedback for record in records] == ["None", FAR, "None", "None"]
    assert [record.error_type for record in records] == ["", "D1", "", ""]
    assert records[2].inventory_before == [] and records[2].inventory_after == ["apple"]
    assert records[3].subtask.action == "End" and records[3].raw_output == END
    # Only the run's last record carries its end reason.
    assert [record.end_reason for record in records] == ["", "", "", "end"] and result.end_reason == "end"
    assert all(record.planner == "mock" and record.observation_mode == "images" and record.run_index == 2
               for record in records)
    assert [view.data[0] for view in records[0].views] == [10, 20, 30, 40]
    _wait(lambda: len(feedback) == 4)
    assert [item.step for item in feedback] == [1, 2, 3, 4]
    # The planner saw the executor's feedback in the next prompt and re-sampled the unparsable answer.
    requests = graph.planner.backend.requests
    assert f"Feedback: {FAR}\n" in requests[2].messages[-1].text
    assert "Historical Execution: (1) Go to, fridge(success) (2) Open, fridge(fail) \n" in requests[2].messages[-1].text
    assert len(requests) == 5 and graph.world.resets == []
    conversation = json.loads((tmp_path / "conv" / result.episode_id / "2" / "conversation.json").read_text())
    assert len(conversation) == 4 and conversation[0].startswith("USER:\nTask: put the apple in the fridge\n")
    assert conversation[2].endswith("ASSISTANT:\n" + PICK + "\n")


def test_step_limit_and_goal_max_steps(graph: Graph) -> None:
    graph.start_planner(backend="mock", mock_outputs=[GO], max_steps=4)
    result = graph.run(max_steps=2)
    assert (result.success, result.error_code, result.steps) == (False, 0, 2)
    assert len(graph.world.goals) == 2


def test_expert_run_with_reset_and_task_progress(graph: Graph, tmp_path: Path) -> None:
    task = tmp_path / "data" / "test" / "91"
    task.mkdir(parents=True)
    (task / "info.txt").write_text("Task: put the apple in the fridge\n\nSubtask1: [End]\n", encoding="utf-8")
    (task / "keypath.json").write_text(json.dumps([["[Go to, fridge]", "[Open, fridge]", "[End]"]]), encoding="utf-8")
    (task / "scene.json").write_text("{}", encoding="utf-8")
    graph.start_planner(backend="expert", expert_source="keypath", data_dir=str(tmp_path))
    graph.world.outcomes = [(True, 0, "", "None"), (False, 9, "E1", "Unable to open, the subtask is too difficult to "
                                                                  "perform"), (True, 0, "", "None")]
    result = graph.run(task_id="91", instruction="")  # run_index 2
    assert (result.success, result.error_code, result.steps, result.episode_id) == (True, 0, 4, "91")
    assert graph.world.resets == [(str(task / "scene.json"), "91/2")]  # the run key restarts the failure stream
    assert [goal.subtask.action for goal in graph.world.goals] == ["Go to", "Open", "Open"]
    _wait(lambda: len(graph.world.records) == 4)
    # The task progress is the evaluator's (its RunScore): scored from the records the planner published.
    steps = [step_from_record(record) for record in graph.world.records if not is_end_marker(record)]
    matcher = KeypathMatcher("91", read_keypaths(task / "keypath.json"), NameIndex(default_alias_table()))
    assert matcher.progress(steps) == pytest.approx(1.0)
    assert graph.world.records[0].planner == "expert:keypath"


def test_on_policy_run_with_the_oracle_reading_the_scene(graph: Graph, tmp_path: Path) -> None:
    """backend mock (the student) with dagger_beta 1: every step executes the oracle's answer, read from
    /sim/query_scene; the rows hold the student's prompts and the oracle's answers."""
    from emmoe_core.robot.scene import SceneSnapshot
    from emmoe_core.robot.state import ContainerState, InstanceState, Pose

    task = tmp_path / "data" / "train" / "12"
    task.mkdir(parents=True)
    plan = ["[Go to, fridge]", "[Open, fridge]", "[End]"]
    (task / "info.txt").write_text("Task: open the fridge\n\n" + "\n".join(
        f"Subtask{index}: {node} (None)\nAnalysis: a.\nFeedback: None\nInventory: None\n"
        for index, node in enumerate(plan, start=1)), encoding="utf-8")
    (task / "keypath.json").write_text(json.dumps([plan]), encoding="utf-8")

    def scene(held: str) -> SceneSnapshot:
        objects = (InstanceState("bowl_0", "024_bowl", "object", Pose((0.0, 0.0, 1.0)), (0.1, 0.1, 0.1)),
                   InstanceState("fridge_0", "fridge", "container", Pose((1.0, 0.0, 0.9)), (1, 1, 2), distance=1.0),
                   InstanceState("sofa_0", "frl_apartment_sofa", "furniture", Pose((0.0, 1.5, 0.4)), (2, 1, 1),
                                 distance=1.5))
        door = ContainerState("fridge_0_door", "fridge", "door", "fridge_0", "hinge", 0.0, 0.0, 2.0, 0.8, distance=1.0)
        return SceneSnapshot((0.0, 0.0), 0.0, held, 0.0, objects, (door,))

    graph.world.scenes = [scene("bowl_0"), scene("bowl_0"), scene(""), scene("")]
    graph.world.inventory = ["bowl"]
    graph.start_planner(backend="mock", mock_outputs=[GO], mock_observation_mode="text", data_dir=str(tmp_path),
                        reset_simulator=False, dagger_rows_dir=str(tmp_path / "rows"), dagger_beta=1.0)
    result = graph.run(task_id="12")
    assert (result.success, result.end_reason, result.steps) == (True, "end", 4)
    sent = [(goal.subtask.action, goal.subtask.target, goal.subtask.place) for goal in graph.world.goals]
    assert sent == [("Go to", "fridge", ""), ("Put", "bowl", "sofa"), ("Open", "fridge", "")]
    (rows,) = (tmp_path / "rows").glob("12__*.jsonl")
    lines = [json.loads(line) for line in rows.read_text(encoding="utf-8").splitlines()]
    assert [line["answer"].splitlines()[0] for line in lines] == [
        "Subtask: [Go to, fridge]", "Subtask: [Put, bowl, sofa]", "Subtask: [Open, fridge]", "Subtask: [End]"]
    assert lines[0]["messages"][-1]["content"].startswith("Visible objects:")
    assert all(line["executed_by"] == "oracle" and line["student_answer"] == GO for line in lines)


def test_openai_stub_run(graph: Graph, openai_stub: Any) -> None:
    openai_stub.answers = [GO, END]
    graph.start_planner(backend="openai", openai_base_url=openai_stub.url, openai_model="stub-model")
    result = graph.run()
    assert (result.success, result.steps) == (True, 2)
    image_parts = [part for part in openai_stub.requests[0]["messages"][-1]["content"] if part["type"] == "image_url"]
    assert len(image_parts) == 4
    _wait(lambda: len(graph.world.records) == 2)
    assert graph.world.records[0].planner == "openai:stub-model"


def test_openai_server_down_is_a_planner_error(graph: Graph) -> None:
    graph.start_planner(backend="openai", openai_base_url="http://127.0.0.1:9/v1", openai_max_retries=0)
    result = graph.run()
    assert result.error_code == graph.RunTask.Result.PLANNER_ERROR and "cannot connect" in result.error_msg


def test_a_planner_that_gives_up_ends_without_an_end_step(graph: Graph) -> None:
    graph.start_planner(backend="mock", mock_outputs=[GO, "I do not know."])
    graph.world.outcomes = [(True, 0, "", "None")]
    result = graph.run()
    assert (result.success, result.error_code, result.steps, result.end_reason) == (False, 0, 1, "gave_up")
    _wait(lambda: len(graph.world.records) == 2)
    marker = graph.world.records[1]
    # A run-end marker, not an End step: no subtask, the last sample kept for debugging.
    assert (marker.step, marker.subtask.action, marker.end_reason, marker.raw_output) == (2, "", "gave_up",
                                                                                         "I do not know.")
    assert len(graph.world.goals) == 1


def test_executor_timeout_ends_the_run_cleanly(graph: Graph) -> None:
    graph.start_planner(backend="mock", mock_outputs=[GO], executor_timeout_s=0.5)
    graph.world.outcomes = ["hang"]
    result = graph.run()
    assert result.error_code == graph.RunTask.Result.EXECUTOR_ERROR and result.steps == 1
    assert "executor timeout" in result.error_msg
    _wait(lambda: len(graph.world.records) == 1)
    record = graph.world.records[0]
    assert not record.success and record.error_code == 22 and "no result within 0.5 s" in record.feedback
    _wait(lambda: graph.world.cancelled_goals == 1)  # the hanging goal was cancelled


def test_cancel_and_busy(graph: Graph) -> None:
    graph.start_planner(backend="mock", mock_outputs=[GO])
    graph.world.outcomes = ["hang"]
    first = graph.send()
    _wait(lambda: len(graph.world.goals) == 1)
    busy = _result_of(graph.send().get_result_async()).result
    assert busy.error_code == graph.RunTask.Result.BUSY
    _result_of(first.cancel_goal_async())
    result = _result_of(first.get_result_async()).result
    assert result.error_code == graph.RunTask.Result.CANCELED
    _wait(lambda: graph.world.cancelled_goals == 1)
    graph.world.outcomes = [(True, 0, "", "None")]
    assert graph.run(max_steps=1).error_code == 0  # the planner is free again


def test_invalid_task(graph: Graph) -> None:
    graph.start_planner(backend="mock", mock_outputs=[GO])
    result = graph.run(task_id="", instruction="")
    assert result.error_code == graph.RunTask.Result.INVALID_TASK and "neither" in result.error_msg
    result = graph.run(task_id="42", instruction="")
    assert result.error_code == graph.RunTask.Result.INVALID_TASK and "unknown task '42'" in result.error_msg


def test_node_process_with_a_mock_script(ros_process: Callable[..., Any], ros_context: Any,
                                         ros_node_factory: Callable[..., Any], tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([GO, END]), encoding="utf-8")
    graph = Graph(ros_context, ros_node_factory)
    try:
        ros_process("-m", "homiebot_planner.planner_node", "--ros-args", "-p", "backend:=mock",
                    "-p", f"mock_file:={script}", ready="planner ready", timeout=60)
        assert graph.client.wait_for_server(timeout_sec=20.0)
        result = graph.run()
        assert (result.success, result.steps) == (True, 2)
        _wait(lambda: len(graph.world.records) == 2)
    finally:
        graph.close()


def test_bad_parameter_exits_with_a_clear_message(ros_process: Callable[..., Any]) -> None:
    process = ros_process("-m", "homiebot_planner.planner_node", "--ros-args", "-p", "backend:=llama")
    assert process.process.wait(timeout=60) == 2
    process.stop()
    assert "planner_node: error: backend must be one of mock, expert, openai, hf, smollm2, homiebot, random, oracle, not 'llama'" in process.output()
    assert "Traceback" not in process.output()


@pytest.mark.slow
def test_smollm2_run(graph: Graph) -> None:
    graph.start_planner(backend="smollm2", max_steps=3)
    result = graph.run()
    assert result.error_code == 0 and result.steps >= 1
    _wait(lambda: len(graph.world.records) == result.steps)
    for record in graph.world.records:
        assert record.observation_mode == "text" and record.planner == "smollm2"
        assert record.subtask.action in ("Go to", "Pick", "Put", "Open", "Close", "End")
        assert record.subtask.action == "End" or record.subtask.target in ("fridge", "apple", "sofa")


@pytest.mark.ros
def test_tri_state_parameters_accept_booleans_from_the_command_line(ros_context):
    """`-p in_context_example:=false` arrives as a bool; the node takes it as the choice false."""
    from rclpy.parameter import Parameter

    from homiebot_planner.planner_node import PlannerNode

    node = PlannerNode(context=ros_context, parameter_overrides=[
        Parameter("backend", value="mock"), Parameter("mock_outputs", value=["Analysis: a\nSubtask: [End]\nModel: None"]),
        Parameter("in_context_example", value=False), Parameter("constrained_decoding", value=True)])
    try:
        assert node.settings.in_context_example is False
    finally:
        node.destroy_node()
