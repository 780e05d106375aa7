"""Issue 40: in the default configuration (ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT with the loopback Fast DDS
profile, what env.sh exports) no socket of any process of a run is off loopback, while the run's messages flow.

The sockets are sampled with `ss -uanp` / `ss -tanp` while the processes run, as the benchmark runs were probed.
Ports tell the participants apart: RTPS well-known ports (spec 9.6.1.1) are PB + DG * domain + d1 + PG * participant
for unicast discovery, so every participant id must stay below the profile's maxInitialPeersRange (32), or the
initial peer 127.0.0.1 would not reach it.
"""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from homiebot.bringup import dds_profile_path

ROOT = Path(__file__).resolve().parents[1]
PROBE = ROOT / "tests" / "processes" / "dds_probe.py"
PORT_BASE, DOMAIN_GAIN, DISCOVERY_UNICAST_OFFSET, PARTICIPANT_GAIN = 7400, 250, 10, 2
MAX_INITIAL_PEERS = 32
SS_LINE = re.compile(r"^\S+\s+\d+\s+\d+\s+(?P<local>\S+)\s+(?P<peer>\S+)\s+users:\((?P<users>.*)\)\s*$")


def default_environment() -> dict[str, str]:
    """What env.sh gives every process: SYSTEM_DEFAULT with the installed loopback profile."""
    return {**os.environ, "ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT",
            "FASTDDS_DEFAULT_PROFILES_FILE": str(dds_profile_path())}


@dataclass(frozen=True)
class Socket:
    protocol: str
    local: str
    peer: str
    pid: int

    @staticmethod
    def _host(endpoint: str) -> str:
        return endpoint.rsplit(":", 1)[0].strip("[]").split("%")[0]

    @property
    def port(self) -> int:
        return int(self.local.rsplit(":", 1)[1])

    @property
    def local_host(self) -> str:
        return self._host(self.local)

    def on_loopback(self) -> bool:
        """Bound to a loopback address, and connected (if at all) to one."""
        endpoints = [self.local] + ([self.peer] if not self.peer.endswith(":*") else [])
        for endpoint in endpoints:
            host = self._host(endpoint)
            if host == "*":
                return False
            address = ipaddress.ip_address(host)
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                address = address.ipv4_mapped
            if not address.is_loopback:
                return False
        return True


def sample_sockets(pids: set[int]) -> list[Socket]:
    """Every UDP and TCP socket (any state) that one of `pids` holds, from `ss -uanp` and `ss -tanp`."""
    sockets = []
    for protocol in ("u", "t"):
        listing = subprocess.run(["ss", f"-{protocol}anp"], capture_output=True, text=True, check=True).stdout
        for line in listing.splitlines()[1:]:
            match = SS_LINE.match(line)
            if match is None:
                continue
            for pid in {int(found) for found in re.findall(r"pid=(\d+)", match["users"])} & pids:
                sockets.append(Socket("udp" if protocol == "u" else "tcp", match["local"], match["peer"], pid))
    return sockets


def process_tree(root: int) -> set[int]:
    """`root` and all its descendants that are alive now."""
    try:
        parent = psutil.Process(root)
        return {root} | {child.pid for child in parent.children(recursive=True)}
    except psutil.NoSuchProcess:
        return set()


def domain_ids(pids: set[int]) -> set[int]:
    """The ROS_DOMAIN_ID of each of `pids` (the runner passes its leased domain to every node process)."""
    found = set()
    for pid in pids:
        try:
            found.add(int(psutil.Process(pid).environ().get("ROS_DOMAIN_ID", "0")))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def participant_ids(sockets: list[Socket], domain_id: int) -> set[int]:
    """The RTPS participant ids behind the discovery sockets (metatraffic unicast ports) of `domain_id`."""
    first = PORT_BASE + DOMAIN_GAIN * domain_id + DISCOVERY_UNICAST_OFFSET
    return {(socket.port - first) // PARTICIPANT_GAIN for socket in sockets if socket.protocol == "udp"
            and first <= socket.port < PORT_BASE + DOMAIN_GAIN * (domain_id + 1)
            and (socket.port - first) % PARTICIPANT_GAIN == 0}


def summary(samples: list[list[Socket]]) -> str:
    """Counts for the report: sockets per sample, and by local address over the largest sample."""
    largest = max(samples, key=len) if samples else []
    by_address = Counter(f"{socket.protocol} {socket.local_host}" for socket in largest)
    return (f"{len(samples)} samples, {min(map(len, samples), default=0)}-{len(largest)} sockets per sample, "
            f"{len({socket.pid for socket in largest})} processes; largest sample by address: {dict(by_address)}")


@pytest.mark.ros
def test_no_socket_of_a_run_is_off_loopback(tmp_path):
    """A whole `homiebot run` (expert planner, task 92, all five nodes and the runner's client) in the default
    configuration: every socket of every process of the run, sampled every 0.3 s, is on loopback; the run
    delivers its messages (the task succeeds, scored through ROS)."""
    out = tmp_path / "runs"
    log_path = tmp_path / "run.log"
    with log_path.open("w") as log:
        run = subprocess.Popen(["homiebot", "run", "--tasks", "92", "--runs", "1", "--planner", "expert",
                                "--no-videos", "--out", str(out)],
                               cwd=ROOT, env=default_environment(), stdout=log, stderr=subprocess.STDOUT, text=True)
        samples: list[list[Socket]] = []
        domains: set[int] = set()
        deadline = time.monotonic() + 280
        try:
            while run.poll() is None and time.monotonic() < deadline:
                sockets = sample_sockets(process_tree(run.pid))
                domains |= domain_ids({socket.pid for socket in sockets} - {run.pid})
                if sockets:
                    samples.append(sockets)
                time.sleep(0.3)
        finally:
            if run.poll() is None:
                run.kill()
            run.wait()
    output = log_path.read_text()
    assert run.returncode == 0, output[-3000:]
    assert "100.00" in output, output[-3000:]  # SR and TP of the one run: every message got through
    off_loopback = sorted({socket for sample in samples for socket in sample if not socket.on_loopback()},
                          key=str)
    assert not off_loopback, off_loopback
    full = [sample for sample in samples if len({socket.pid for socket in sample}) >= 6]  # five nodes + runner
    assert len(full) >= 5, summary(samples)
    assert len(domains) == 1, domains  # the runner's leased domain, for every node
    domain_id = domains.pop()
    ids = set().union(*(participant_ids(sample, domain_id) for sample in samples))
    assert ids and max(ids) < MAX_INITIAL_PEERS, ids
    print(f"\nrun sockets: {summary(samples)}; domain {domain_id}, participant ids {sorted(ids)}")


@pytest.mark.ros
def test_a_pair_of_nodes_talks_on_loopback_only_and_domains_stay_apart(ros_process, ros_domain_id, monkeypatch):
    """Two project nodes (spin_node) in one domain hear each other with every socket on loopback; a listener in
    another domain (its own ports: they derive from the domain id) hears nothing."""
    from emmoe_core.ros_domains import lease_domain

    for name, value in default_environment().items():
        monkeypatch.setenv(name, value)
    with lease_domain() as other:
        listener = ros_process(str(PROBE), "listen", ready="listening")
        monkeypatch.setenv("ROS_DOMAIN_ID", str(other.domain_id))
        stranger = ros_process(str(PROBE), "listen", ready="listening")
        monkeypatch.setenv("ROS_DOMAIN_ID", str(ros_domain_id))
        talker = ros_process(str(PROBE), "talk", ready="talking")
        listener.wait_for("heard 20", timeout=30)
        pids = {listener.process.pid, talker.process.pid, stranger.process.pid}
        sockets = sample_sockets(pids)
        time.sleep(1.0)
        assert not any(line.startswith("heard") for line in stranger.lines), stranger.output()
    assert {socket.pid for socket in sockets} == pids
    assert all(socket.on_loopback() for socket in sockets), sockets
    assert len(participant_ids(sockets, ros_domain_id)) == 2
    assert len(participant_ids(sockets, other.domain_id)) == 1
    print(f"\npair sockets: {summary([sockets])}")


@pytest.mark.parametrize("endpoint, peer, expected", [
    ("127.0.0.1:7410", "0.0.0.0:*", True), ("[::1]:7410", "[::]:*", True), ("[::ffff:127.0.0.1]:80", "*:*", True),
    ("127.0.0.1%lo:53", "0.0.0.0:*", True), ("0.0.0.0:40000", "0.0.0.0:*", False), ("*:7410", "*:*", False),
    ("192.0.2.2:40000", "0.0.0.0:*", False), ("127.0.0.1:5000", "10.0.0.1:80", False), ("[::]:1", "[::]:*", False),
])
def test_the_loopback_check_of_a_sampled_socket(endpoint, peer, expected):
    assert Socket("udp", endpoint, peer, 1).on_loopback() is expected


def test_sampling_sees_this_process_sockets():
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.bind(("127.0.0.1", 0))
        bound = f"127.0.0.1:{probe.getsockname()[1]}"
        sampled = sample_sockets({os.getpid()})
    assert any(found.local == bound and found.on_loopback() for found in sampled), sampled
