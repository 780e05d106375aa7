"""The DDS guard (issue 40): which discovery ranges and Fast DDS profiles let a node start, and that nodes and CLIs
really refuse to start otherwise."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from emmoe_core import dds_guard, ros_helpers
from emmoe_core.dds_guard import DiscoveryNotConfined, discovery_problem, profile_problems, require_loopback_dds

ROOT = Path(__file__).resolve().parents[1]
PROFILE = ROOT / "src" / "homiebot" / "config" / "fastdds_loopback.xml"
LOOPBACK = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT", "FASTDDS_DEFAULT_PROFILES_FILE": str(PROFILE)}
FIX = "To fix: set ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT and FASTDDS_DEFAULT_PROFILES_FILE="
LAN = {"HOMIEBOT_DDS_LAN_INTERFACE": "192.168.1.20", "HOMIEBOT_DDS_LAN_PEERS": "192.168.1.10"}


def write_profile(tmp_path: Path, text: str, name: str = "profile.xml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def mutated(tmp_path: Path, old: str, new: str, count: int = 1) -> Path:
    text = PROFILE.read_text()
    assert text.count(old) >= count, old
    return write_profile(tmp_path, text.replace(old, new, count))


def test_the_shipped_profile_is_loopback_only():
    assert profile_problems(PROFILE, {}) == []
    assert discovery_problem(LOOPBACK) is None
    text = PROFILE.read_text()
    assert "<maxInitialPeersRange>32</maxInitialPeersRange>" in text and "Multicast" not in text


@pytest.mark.parametrize("environ", [
    {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"},
    {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "FASTDDS_DEFAULT_PROFILES_FILE": str(PROFILE)},
    LOOPBACK,
    {**LOOPBACK, "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"},
    {**LOOPBACK, "RMW_IMPLEMENTATION": ""},
    {**LOOPBACK, "ROS_STATIC_PEERS": "127.0.0.1"},
    {**LOOPBACK, "SKIP_DEFAULT_XML": "0"},
])
def test_accepted_environments(environ):
    assert discovery_problem(environ) is None
    require_loopback_dds(environ)


@pytest.mark.parametrize("environ, reason", [
    ({}, "ROS_AUTOMATIC_DISCOVERY_RANGE is unset (Kilted then uses SUBNET)"),
    ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}, "ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET, not"),
    ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET", "FASTDDS_DEFAULT_PROFILES_FILE": str(PROFILE)}, "=SUBNET, not"),
    ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "OFF"}, "=OFF, not"),
    ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "localhost"}, "=localhost, not"),
    ({"ROS_LOCALHOST_ONLY": "1"}, "is unset"),
    ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT"}, "FASTDDS_DEFAULT_PROFILES_FILE is not set"),
    ({**LOOPBACK, "FASTDDS_DEFAULT_PROFILES_FILE": ""}, "FASTDDS_DEFAULT_PROFILES_FILE is not set"),
    ({**LOOPBACK, "FASTDDS_DEFAULT_PROFILES_FILE": "/no/such/profile.xml"}, "it does not exist"),
    ({**LOOPBACK, "FASTDDS_DEFAULT_PROFILES_FILE": f"{PROFILE};{PROFILE}"}, "it does not exist"),
    ({**LOOPBACK, "FASTDDS_DEFAULT_PROFILES_FILE": str(ROOT)}, "it is not a regular file"),
    ({**LOOPBACK, "RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"}, "RMW_IMPLEMENTATION=rmw_cyclonedds_cpp"),
    ({**LOOPBACK, "SKIP_DEFAULT_XML": "1"}, "SKIP_DEFAULT_XML is set"),
    ({**LOOPBACK, "ROS_DISCOVERY_SERVER": "10.0.0.5:11811"}, "ROS_DISCOVERY_SERVER is set"),
    ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_DISCOVERY_SERVER": "10.0.0.5"}, "ROS_DISCOVERY_SERVER"),
    ({**LOOPBACK, "FASTDDS_ENVIRONMENT_FILE": "/tmp/env.json"}, "FASTDDS_ENVIRONMENT_FILE is set"),
    ({**LOOPBACK, "ROS_STATIC_PEERS": "127.0.0.1;10.0.0.3"}, "ROS_STATIC_PEERS=127.0.0.1;10.0.0.3"),
    ({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_STATIC_PEERS": "10.0.0.3"}, "ROS_STATIC_PEERS"),
])
def test_refused_environments_say_what_to_set(environ, reason):
    problem = discovery_problem(environ)
    assert problem is not None and problem.startswith("refusing to start ROS 2 nodes: ")
    assert reason in problem and FIX in problem and problem.endswith("or ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST")
    assert "\n" not in problem
    with pytest.raises(DiscoveryNotConfined, match="refusing to start ROS 2 nodes"):
        require_loopback_dds(environ)


def test_the_fix_names_the_installed_profile(tmp_path):
    share = tmp_path / "homiebot" / "share" / "homiebot" / "config"
    share.mkdir(parents=True)
    (share / "fastdds_loopback.xml").write_text(PROFILE.read_text())
    problem = discovery_problem({"AMENT_PREFIX_PATH": f"/elsewhere:{tmp_path / 'homiebot'}"})
    assert f"FASTDDS_DEFAULT_PROFILES_FILE={share / 'fastdds_loopback.xml'} (`. env.sh` sets both)" in problem


@pytest.mark.parametrize("old, new, reason", [
    ("<useBuiltinTransports>false</useBuiltinTransports>", "<useBuiltinTransports>true</useBuiltinTransports>",
     "useBuiltinTransports is not false"),
    ("<useBuiltinTransports>false</useBuiltinTransports>", "", "useBuiltinTransports is not false"),
    ("<interfaceWhiteList>\n          <address>127.0.0.1</address>\n        </interfaceWhiteList>", "",
     "allows interfaces all, not exactly 127.0.0.1"),
    ("<address>127.0.0.1</address>\n        </interfaceWhiteList>",
     "<address>127.0.0.1</address><address>10.1.2.3</address></interfaceWhiteList>", "allows interfaces"),
    ("<address>127.0.0.1</address>\n        </interfaceWhiteList>",
     "<interface>eth0</interface></interfaceWhiteList>", "allows interfaces ['eth0']"),
    ("<type>UDPv4</type>", "<type>TCPv4</type>", "is TCPv4, not one of UDPv4, SHM"),
    ("<type>UDPv4</type>", "<type>UDPv6</type>", "is UDPv6"),
    ("<transport_id>homiebot_loopback_udp</transport_id>\n        </userTransports>",
     "<transport_id>other</transport_id>\n        </userTransports>", "user transport 'other' has no"),
    ("<userTransports>\n          <transport_id>homiebot_loopback_udp</transport_id>\n        </userTransports>", "",
     "no userTransports"),
    ("<metatrafficUnicastLocatorList>\n            <locator>\n              <udpv4>\n                "
     "<address>127.0.0.1</address>", "<metatrafficUnicastLocatorList>\n            <locator>\n              <udpv4>\n"
     "                <address>10.0.0.1</address>", "metatrafficUnicastLocatorList names 10.0.0.1"),
    ("<initialPeersList>", "<initialPeersList><locator><udpv4><address>10.0.0.2</address></udpv4></locator>",
     "initialPeersList names 10.0.0.2"),
    ("<initialPeersList>", "<initialPeersList><locator><tcpv4><address>127.0.0.1</address></tcpv4></locator>",
     "initialPeersList holds a locator that is not a UDPv4 address"),
    ("<defaultUnicastLocatorList>", "<defaultUnicastLocatorList><locator><udpv4><address>0.0.0.0</address>"
     "</udpv4></locator>", "defaultUnicastLocatorList names 0.0.0.0"),
    ("</builtin>", "<metatrafficMulticastLocatorList><locator><udpv4><address>127.0.0.1</address></udpv4>"
     "</locator></metatrafficMulticastLocatorList></builtin>", "metatrafficMulticastLocatorList is not empty"),
    ("</defaultUnicastLocatorList>", "</defaultUnicastLocatorList><defaultMulticastLocatorList><locator><udpv4>"
     "<address>239.255.0.1</address></udpv4></locator></defaultMulticastLocatorList>",
     "defaultMulticastLocatorList is not empty"),
    ('is_default_profile="true"', 'is_default_profile="false"', "declares 0 default participant profiles"),
    ("</profiles>", '<participant profile_name="b" is_default_profile="true"><rtps/></participant></profiles>',
     "declares 2 default participant profiles"),
    ("</profiles>", '<data_writer profile_name="w"><unicastLocatorList><locator><udpv4><address>10.9.9.9</address>'
     "</udpv4></locator></unicastLocatorList></data_writer></profiles>", "names addresses other than 127.0.0.1: "
     "10.9.9.9"),
    ("<dds", "<notdds", "is not well-formed XML"),
])
def test_each_loophole_in_a_profile_is_refused(tmp_path, old, new, reason):
    path = mutated(tmp_path, old, new)
    problems = "; ".join(profile_problems(path, {}))
    assert reason in problems, problems
    problem = discovery_problem({**LOOPBACK, "FASTDDS_DEFAULT_PROFILES_FILE": str(path)})
    assert problem is not None and f"FASTDDS_DEFAULT_PROFILES_FILE={path} is not a loopback-only profile" in problem


def test_for_each_locator_list_missing_the_profile_is_refused(tmp_path):
    text = PROFILE.read_text()
    for name in ("metatrafficUnicastLocatorList", "initialPeersList", "defaultUnicastLocatorList"):
        stripped = re.sub(rf"<{name}>.*?</{name}>", "", text, flags=re.S)
        path = write_profile(tmp_path, stripped, f"{name}.xml")
        assert f"{name} is missing or empty" in "; ".join(profile_problems(path, {}))


def test_the_profile_before_issue_40_is_refused(tmp_path):
    """Only the interface allowlist: sockets on 127.0.0.1, but Fast DDS's default (multicast) discovery."""
    old = re.sub(r"<builtin>.*?</builtin>|<defaultUnicastLocatorList>.*?</defaultUnicastLocatorList>|"
                 r"<maxInitialPeersRange>.*?</maxInitialPeersRange>", "", PROFILE.read_text(), flags=re.S)
    problems = profile_problems(write_profile(tmp_path, old), {})
    assert len(problems) == 3 and all("missing or empty" in problem for problem in problems)


def test_a_profile_without_namespace_or_dds_root_and_with_shm_is_accepted(tmp_path):
    text = PROFILE.read_text().replace(' xmlns="http://www.eprosima.com"', "")
    text = text.replace("<transport_descriptors>", "<transport_descriptors><transport_descriptor>"
                        "<transport_id>shm</transport_id><type>SHM</type></transport_descriptor>")
    text = text.replace("</userTransports>", "<transport_id>shm</transport_id></userTransports>")
    text = re.sub(r"</?dds[^>]*>", "", text)
    assert profile_problems(write_profile(tmp_path, text), {}) == []


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "profile.xml"
    os.mkfifo(fifo)
    result: list[str] = []
    reader = threading.Thread(target=lambda: result.extend(profile_problems(fifo, {})), daemon=True)
    reader.start()
    reader.join(timeout=5)
    assert result == ["it is not a regular file"]


def test_a_huge_or_unreadable_profile_is_refused(tmp_path):
    huge = write_profile(tmp_path, "<dds>" + " " * (dds_guard.MAX_PROFILE_BYTES + 1) + "</dds>")
    assert profile_problems(huge, {}) == [f"it is larger than {dds_guard.MAX_PROFILE_BYTES} bytes"]
    assert "root element is <other>" in profile_problems(write_profile(tmp_path, "<other/>", "o.xml"), {})[0]


def lan_profile(tmp_path: Path) -> Path:
    """The robot-LAN profile of docs/deployment.md, as the documentation prints it."""
    text = (ROOT / "docs" / "deployment.md").read_text()
    block = re.search(r"```xml\n(.*?)```", text, flags=re.S)
    assert block is not None, "docs/deployment.md has no XML profile"
    return write_profile(tmp_path, "\n".join(line[2:] for line in block.group(1).splitlines()).strip() + "\n",
                         "fetch_lan.xml")


def test_the_documented_robot_lan_profile_needs_the_explicit_opt_in(tmp_path):
    path = lan_profile(tmp_path)
    environ = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT", "FASTDDS_DEFAULT_PROFILES_FILE": str(path)}
    refused = discovery_problem(environ)
    assert refused is not None and "allows interfaces ['192.168.1.20'], not exactly 127.0.0.1" in refused
    assert discovery_problem({**environ, **LAN}) is None
    assert discovery_problem({**environ, **LAN, "ROS_STATIC_PEERS": "192.168.1.10"}) is None
    # the opt-in is narrow: the wrong interface, a missing peer, SUBNET or multicast are still refused
    assert "allows interfaces" in discovery_problem({**environ, **LAN, "HOMIEBOT_DDS_LAN_INTERFACE": "192.168.1.21"})
    assert "initialPeersList names 192.168.1.10" in discovery_problem(
        {**environ, "HOMIEBOT_DDS_LAN_INTERFACE": "192.168.1.20"})
    assert "=SUBNET, not" in discovery_problem({**environ, **LAN, "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"})
    assert "is not an IPv4 address" in discovery_problem({**environ, **LAN, "HOMIEBOT_DDS_LAN_INTERFACE": "eth0"})
    assert "not a unicast LAN address" in discovery_problem(
        {**environ, **LAN, "HOMIEBOT_DDS_LAN_INTERFACE": "239.255.0.1"})
    assert "without HOMIEBOT_DDS_LAN_INTERFACE" in discovery_problem(
        {**LOOPBACK, "HOMIEBOT_DDS_LAN_PEERS": "192.168.1.10"})
    multicast = write_profile(tmp_path, path.read_text().replace(
        "</builtin>", "<metatrafficMulticastLocatorList><locator><udpv4><address>192.168.1.20</address></udpv4>"
        "</locator></metatrafficMulticastLocatorList></builtin>"), "lan_multicast.xml")
    assert "multicast must stay off" in discovery_problem(
        {**environ, **LAN, "FASTDDS_DEFAULT_PROFILES_FILE": str(multicast)})


def test_spin_node_refuses_before_rclpy_init(monkeypatch, capsys):
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "SUBNET")
    monkeypatch.setattr(ros_helpers.rclpy, "init", lambda **_: pytest.fail("rclpy.init was called"))
    assert ros_helpers.spin_node(lambda: pytest.fail("a node was built"), name="probe_node") == 2
    err = capsys.readouterr().err
    assert err.startswith("probe_node: error: refusing to start ROS 2 nodes: ROS_AUTOMATIC_DISCOVERY_RANGE=SUBNET")
    assert err.count("\n") == 1


def test_private_node_refuses_before_rclpy_init(monkeypatch):
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "SYSTEM_DEFAULT")
    monkeypatch.setenv("FASTDDS_DEFAULT_PROFILES_FILE", "")
    monkeypatch.setattr(ros_helpers.rclpy, "init", lambda **_: pytest.fail("rclpy.init was called"))
    with pytest.raises(DiscoveryNotConfined, match="FASTDDS_DEFAULT_PROFILES_FILE is not set"):
        with ros_helpers.private_node("probe"):
            pass


def test_fast_rtps_is_the_middleware_when_rmw_implementation_is_unset():
    """SYSTEM_DEFAULT accepts an unset RMW_IMPLEMENTATION because Kilted's default is rmw_fastrtps_cpp."""
    env = {name: value for name, value in os.environ.items() if name != "RMW_IMPLEMENTATION"}
    probe = "from rclpy.utilities import get_rmw_implementation_identifier as i; print(i())"
    result = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == dds_guard.FASTRTPS, result.stderr[-2000:]


@pytest.mark.parametrize("command", [
    [sys.executable, "-m", "homiebot_executor.monitor_node"],
    [sys.executable, "-m", "emmoe_eval.evaluator_node"],
    ["homiebot", "up"],
    ["homiebot", "run", "--tasks", "91", "--runs", "1", "--planner", "mock", "--out", "{tmp}"],
    ["homiebot", "send-subtask", "[Go to, fridge]"],
])
@pytest.mark.parametrize("environ", [
    {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"},
    {"FASTDDS_DEFAULT_PROFILES_FILE": "/no/such/profile.xml"},
])
def test_nodes_and_clis_refuse_to_start_off_loopback(tmp_path, command, environ):
    """A node or CLI in a bad environment exits 2 at once with the one-line message, before any participant."""
    env = {**os.environ, **LOOPBACK, **environ}
    argv = [part.replace("{tmp}", str(tmp_path / "runs")) for part in command]
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=90, cwd=ROOT)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and lines, result.stderr[-3000:]
    assert "refusing to start ROS 2 nodes" in lines[-1] and FIX in lines[-1], lines
    assert not (tmp_path / "runs").exists()
