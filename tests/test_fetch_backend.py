"""The `fetch` backend against the fake Fetch (its own process, MuJoCo behind a real Fetch's ROS interfaces): the
software stop halts a moving base within 100 ms of the robot's clock and the arm where it was, dry-run sends
nothing, the head camera arrives, stale sensors refuse the start, the fake Fetch offers nothing but those
interfaces, and the expert planner completes an EMMOE test task through the whole stack on the fetch
backend."""

from __future__ import annotations

import json
import math
import subprocess
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("mujoco")
pytest.importorskip("control_msgs")

from emmoe_core.robot import fetch  # noqa: E402
from emmoe_core.robot.state import BackendError  # noqa: E402

from habitat_bridge.bridge_core import seconds_of  # noqa: E402
from habitat_bridge.fetch.config import FetchConfig, FetchTopics  # noqa: E402
from habitat_bridge.fetch.robot import FetchRobot  # noqa: E402
from habitat_bridge.fetch.safety import SafetyConfig  # noqa: E402

pytestmark = pytest.mark.ros

ROOT = Path(__file__).resolve().parents[1]
# The arm swung out from its tucked pose: a move of about 1.3 rad on the shoulder pan.
SWUNG_OUT = (0.0, 0.2, -0.2, 1.2, 0.0, 1.2, 0.0)


def start_fake_fetch(ros_process, task: str = "100", *options: str):
    """The fake Fetch process in test task `task`'s scene."""
    return ros_process("-m", "habitat_bridge.fetch.fake_fetch_node", "--scene",
                       str(ROOT / "data" / "test" / task / "scene.json"), *options, ready="fake_fetch ready",
                       timeout=60.0)


@pytest.fixture
def fake_fetch(ros_process):
    return start_fake_fetch(ros_process)


@pytest.fixture
def spun(ros_context):
    """Spin nodes of the test's context in a background thread: `robot_node = spun("name")`."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    executor = SingleThreadedExecutor(context=ros_context)
    nodes = []
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set() and ros_context.ok():
            executor.spin_once(timeout_sec=0.01)

    thread = threading.Thread(target=spin, daemon=True)

    def make(name: str):
        node = Node(name, context=ros_context)
        nodes.append(node)
        executor.add_node(node)
        if not thread.is_alive():
            thread.start()
        return node

    yield make
    stop.set()
    thread.join(timeout=5)
    for node in nodes:
        node.destroy_node()


def ready_robot(spun, config: FetchConfig | None = None) -> FetchRobot:
    robot = FetchRobot(spun("fetch_backend"), config)
    robot.wait_until_ready()
    deadline = time.monotonic() + 20
    while not all(client.server_is_ready() for client in (*robot._trajectories.values(), robot._gripper)):
        assert time.monotonic() < deadline, "the fake Fetch's controllers never came up"
        time.sleep(0.05)
    return robot


def arm_speed(robot: FetchRobot, joint_states: list) -> float:
    message = joint_states[-1]
    speeds = dict(zip(message.name, message.velocity))
    return max(abs(speeds[joint]) for joint in fetch.ARM_JOINTS)


def test_the_stop_topic_halts_a_moving_base_within_100_ms_and_the_arm_where_it_was(fake_fetch, spun):
    """The stop is timed on the robot's clock from a process that also runs the backend: a loaded machine can delay
    the stop in this test's own executor, so the measurement gets three tries (the arm tucked again and the base turned
    to open floor in between) and one must meet every limit; each failed try's reason is reported."""
    from nav_msgs.msg import Odometry
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Empty

    robot = ready_robot(spun)
    operator = spun("operator")
    stop = operator.create_publisher(Empty, FetchTopics().stop, 10)
    odometry, joint_states, stopped_at = [], [], []
    stop_requested = threading.Event()

    def stamp_of(message) -> float:
        return seconds_of(message.header.stamp)

    def on_odometry(message) -> None:
        # The operator presses stop as a fresh odometry message arrives: the robot's clock is then that message's
        # stamp (a stop sent later in a tick would be timed from a clock reading up to a tick old). Under load the
        # operator's queue may lag the backend's: the stop is timed from the newer of the two readings.
        odometry.append(message)
        if stop_requested.is_set() and not stopped_at:
            stopped_at.append(max(stamp_of(message), robot.time))
            stop.publish(Empty())

    operator.create_subscription(Odometry, FetchTopics().odom, on_odometry, 50)
    operator.create_subscription(JointState, FetchTopics().joint_states, joint_states.append, 50)

    def face_open_floor() -> None:
        """Turn in place until the laser sees 1.5 m of free floor ahead: each try drives about 0.4 m forward (the
        fake Fetch does not back up), and near furniture the laser guard would cap the speed the test needs."""
        deadline = robot.time + 12.0
        while robot.clearance() < 1.5:
            assert robot.time < deadline, f"no open floor around the robot: {robot.clearance():.2f} m ahead"
            robot.set_base_velocity(0.0, 0.6)
            robot.step(0.25)
        robot.set_base_velocity(0.0, 0.0)
        robot.step(0.5)

    def stop_while_moving() -> str:
        """Drive the base forward and swing the arm out, press stop; '' when every limit held."""
        face_open_floor()
        odometry.clear(), joint_states.clear(), stopped_at.clear(), stop_requested.clear()
        robot.set_base_velocity(0.3, 0.0)
        robot.set_arm_targets(SWUNG_OUT)
        robot.step(1.2)
        # The operator's view catches up with the backend's clock before it judges the motion and presses stop.
        now = robot.time
        deadline = time.monotonic() + 5.0
        while not (odometry and stamp_of(odometry[-1]) >= now - 1e-6):
            assert time.monotonic() < deadline, "the operator's odometry never caught up with the robot's clock"
            time.sleep(0.005)
        if odometry[-1].twist.twist.linear.x <= 0.2:
            return f"the base never got going: {odometry[-1].twist.twist.linear.x:.3f} m/s"
        if arm_speed(robot, joint_states) <= 0.1:
            return f"the arm never got going: {arm_speed(robot, joint_states):.3f} rad/s"
        arm_at_stop = robot.joint_positions(fetch.ARM_JOINTS)
        stop_requested.set()
        robot.step(0.6)
        if not stopped_at:
            return "no odometry after the stop was requested"

        def stamp(message) -> float:
            return stamp_of(message) - stopped_at[0]

        speeds = [(stamp(message), message.twist.twist.linear.x) for message in odometry if stamp(message) > 0]
        # The base brakes within 50 ms (the stop crosses processes: under load it may land a 20 ms tick late) and
        # is below 5 cm/s within 100 ms of the robot's clock.
        if not any(speed < 0.29 for at, speed in speeds if at <= 0.05 + 1e-6):
            return f"the base did not brake within 50 ms: {speeds[:3]}"
        if abs([speed for at, speed in speeds if at <= 0.1 + 1e-6][-1]) >= 0.05:
            return f"the base was not below 5 cm/s within 100 ms: {speeds[:6]}"
        # The arm's motion (1.3 rad still to go on the shoulder at 0.5 rad/s) ends where the stop found it: the
        # joints are held where they are, and the arm is below 0.05 rad/s within 100 ms (like the base, 5 cm/s).
        before_stop = arm_speed(robot, [message for message in joint_states if stamp(message) <= 0][-1:])
        arm_speeds = [(stamp(message), arm_speed(robot, [message])) for message in joint_states if stamp(message) > 0]
        if before_stop <= 0.3:
            return f"the arm was not moving at the stop: {before_stop}"
        if max(speed for at, speed in arm_speeds if at >= 0.1 - 1e-6) >= 0.05:
            return f"the arm was not below 0.05 rad/s within 100 ms: {arm_speeds[:8]}"
        drift = max(abs(a - b) for a, b in zip(arm_at_stop, robot.joint_positions(fetch.ARM_JOINTS)))
        return f"the arm moved {drift:.3f} rad after the stop" if drift >= 0.1 else ""

    failures = []
    for _ in range(3):
        failure = stop_while_moving()
        if not failure:
            break
        failures.append(failure)
        robot.release_stop()
        robot.set_base_velocity(0.0, 0.0)
        robot.set_arm_targets(fetch.TUCKED_ARM)
        robot.step(3.5)
    assert len(failures) < 3, failures
    # Latched: later commands move nothing until an operator releases the stop.
    robot.set_base_velocity(0.3, 0.0)
    robot.set_arm_targets(fetch.TUCKED_ARM)
    before = robot.base_pose()
    robot.step(0.5)
    assert math.dist(before[:2], robot.base_pose()[:2]) < 0.01


def test_the_laser_guard_stops_the_base_short_of_what_is_ahead(ros_process, spun):
    """Test task 99's scene starts the robot 0.83 m in front of furniture: /base_scan arrives as a Fetch's laser
    sends it, and a base driven straight at the furniture at full speed stops with its front edge the stop distance
    short of it (robot clock, measured by the laser), where turning is still allowed."""
    from sensor_msgs.msg import LaserScan

    start_fake_fetch(ros_process, "99")
    robot = ready_robot(spun)
    scans = []
    spun("listener").create_subscription(LaserScan, FetchTopics().base_scan, scans.append, 10)
    start = robot.clearance()
    assert 0.5 < start < 1.0, start
    robot.set_base_velocity(0.3, 0.0)
    robot.step(5.0)
    stop_distance = SafetyConfig().stop_distance
    assert stop_distance - 0.02 < robot.clearance() < stop_distance + 0.03, robot.clearance()
    assert abs(robot.base_velocity()[0]) < 0.01
    scan = scans[-1]
    assert (len(scan.ranges), scan.header.frame_id) == (fetch.LASER_RAYS, "base_laser_link")
    assert scan.angle_min == pytest.approx(-fetch.LASER_HALF_ANGLE) and scan.range_max == fetch.LASER_RANGE[1]
    robot.set_base_velocity(0.3, 0.5)
    robot.step(1.0)
    assert abs(robot.base_velocity()[1]) > 0.2


def test_dry_run_sends_no_command(fake_fetch, spun):
    from geometry_msgs.msg import Twist

    robot = ready_robot(spun, FetchConfig(safety=SafetyConfig(dry_run=True)))
    listener = spun("listener")
    published = []
    listener.create_subscription(Twist, FetchTopics().cmd_vel, published.append, 10)
    start_pose, start_arm = robot.base_pose(), robot.joint_positions(fetch.ARM_JOINTS)
    robot.set_base_velocity(0.3, 0.2)
    robot.set_arm_targets(SWUNG_OUT)
    assert robot.close_gripper() is None
    robot.step(1.0)
    assert published == []
    assert math.dist(start_pose[:2], robot.base_pose()[:2]) < 0.005
    assert max(abs(a - b) for a, b in zip(start_arm, robot.joint_positions(fetch.ARM_JOINTS))) < 0.01
    kinds = {kind for kind, _ in robot.dry_run_log}
    assert {"cmd_vel", "arm", "gripper"} <= kinds


def test_the_gripper_answers_through_its_action(fake_fetch, spun):
    """Closing in free air stalls on nothing (None), and the fingers end shut; opening brings them apart again."""
    robot = ready_robot(spun)
    assert robot.close_gripper() is None
    robot.step(0.5)
    assert sum(robot.joint_positions(fetch.FINGER_JOINTS)) < 0.02
    assert robot.open_gripper() is None
    robot.step(0.5)
    assert sum(robot.joint_positions(fetch.FINGER_JOINTS)) > 0.08


def test_stale_sensors_refuse_the_start(spun):
    config = FetchConfig(topics=FetchTopics(odom="/nobody/odom"), ready_timeout=0.5)
    robot = FetchRobot(spun("fetch_backend"), config)
    with pytest.raises(BackendError, match="refusing to start: stale or missing odometry, joint states, base laser, head camera"):
        robot.wait_until_ready()


def test_the_head_camera_arrives_as_a_real_fetchs(fake_fetch, spun):
    """Colour, registered depth and camera_info on the real topic names, stamped with the robot's clock, with the
    detector's instance masks of the same image."""
    robot = ready_robot(spun)
    frame = robot.frame_after(robot.time)
    intrinsics = frame.intrinsics
    assert frame.rgb.shape == (intrinsics.height, intrinsics.width, 3) and frame.rgb.dtype.name == "uint8"
    assert frame.depth.shape == frame.ids.shape == (intrinsics.height, intrinsics.width)
    assert (frame.depth[frame.depth > 0] < 20.0).all() and (frame.depth > 0.1).mean() > 0.5
    assert intrinsics.fx > 0 and 0 < intrinsics.cx < intrinsics.width
    assert abs(robot.time - frame.stamp) < 1.0
    assert len(frame.names) == len(frame.categories) > 0 and int(frame.ids.max()) == len(frame.names) - 1


def test_the_fake_fetch_offers_only_a_fetchs_interfaces(fake_fetch, spun):
    """What a skill could reach in the fake's process: the robot's topics and actions, nothing of the simulator."""
    observer = spun("observer")
    topics = FetchTopics()
    deadline = time.monotonic() + 20
    while "fake_fetch" not in observer.get_node_names():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(1.0)
    published = {name for name, _ in observer.get_publisher_names_and_types_by_node("fake_fetch", "/")}
    subscribed = {name for name, _ in observer.get_subscriber_names_and_types_by_node("fake_fetch", "/")}
    services = {name for name, _ in observer.get_service_names_and_types_by_node("fake_fetch", "/")}
    actions = {topics.arm_action, topics.torso_action, topics.head_action, topics.gripper_action}
    action_services = {f"{action}/_action/{kind}" for action in actions
                       for kind in ("send_goal", "cancel_goal", "get_result")}
    assert published - {"/rosout", "/parameter_events"} - {f"{action}/_action/{kind}" for action in actions
                                                           for kind in ("feedback", "status")} \
        == {topics.odom, topics.joint_states, topics.base_scan, topics.rgb, topics.depth, topics.camera_info,
            topics.instances}
    assert subscribed - {"/parameter_events"} == {topics.cmd_vel}
    assert {name for name in services if "/_action/" in name} == action_services
    assert not {name for name in services if name.startswith("/sim")}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("task, expert_source, puts", [
    pytest.param("98", "keypath", 1, id="98-banana-into-bowl"),
    pytest.param("99", "info", 2, id="99-bowl-and-sugar-box", marks=pytest.mark.slow),
])
def test_the_expert_completes_a_test_task_through_the_fetch_backend(tmp_path, monkeypatch, ros_process, task,
                                                                     expert_source, puts):
    """A test task run by `homiebot run` with the expert planner on the fetch backend against the fake Fetch:
    sensor-only skills, the planner's four views by turning the base, checks against the scene memory, scored from
    the executed subtasks and recorded in a bag. The fake lives three times faster than wall time (`--speed 3`).
    Task 98 (a banana into a bowl: four subtasks of its keypath, about 90 s) is in the default suite; task 99 (the
    bowl into the sink, the sugar box onto the sofa: the ten subtasks of its annotated trajectory, 3-4 minutes) in
    the slow one (README: not every run of it succeeds). The fake publishes the simulator's instance masks
    (`--perception segmentation`): this test is about the robot's interfaces; with the learned detector the banana is
    not always found (its recall in models/detector/README.md), and the fake's detector masks are tested in
    test_fake_fetch_core.

    The runner locks its domain for the run, so the test holds a lease while the fake starts on it and lets go just
    before the runner takes it (no other test can lease it in the seconds the fake needs to start)."""
    from emmoe_core.ros_domains import lease_domain

    with lease_domain() as lease:
        domain = lease.domain_id
        monkeypatch.setenv("ROS_DOMAIN_ID", str(domain))
        start_fake_fetch(ros_process, task, "--speed", "3", "--perception", "segmentation")
    out = tmp_path / "fetch"
    result = subprocess.run(
        ["homiebot", "run", "--tasks", task, "--runs", "1", "--planner", "expert", "--setting", "no_background",
         "--no-videos", "--domain-id", str(domain), "--out", str(out), "--set", "sim_stack.backend=fetch",
         "--set", "sim_stack.fetch_joint_speed=1.25", "--set", f"planner.expert_source={expert_source}",
         "--show-nodes"],
        capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = out / task / "1"
    score = json.loads((run_dir / "score.json").read_text())
    # On failure, say why each failed subtask failed (the executor logs the skill's own detail).
    failures = [line for line in result.stdout.splitlines()
                if line.startswith("[homiebot_executor") and "]: [" in line]
    assert (score["success"], score["task_progress"]) == (True, 1.0), "\n".join(failures[-30:])
    steps = [json.loads(line) for line in (run_dir / "trajectory.jsonl").read_text().splitlines()]
    assert [step["action"] for step in steps if step["success"]].count("Put") == puts
    bag = subprocess.run(["emmoe-eval", "score-bag", str(run_dir / "episode.mcap"), "--data", "data", "--json"],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(bag.stdout)["SR"] == 1.0
