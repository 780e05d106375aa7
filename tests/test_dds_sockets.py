"""During a run of the whole stack, no node receives DDS traffic on an address other than loopback."""

from __future__ import annotations

import ipaddress
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
NODE_PROCESSES = 5
# RTPS well-known ports (spec 9.6.1.1): PB + DG * domain + d1 + PG * participant for unicast discovery.
PORT_BASE, DOMAIN_GAIN, DISCOVERY_UNICAST_OFFSET = 7400, 250, 10


def _ephemeral_low() -> int:
    """The first port the kernel hands out for bind(port 0): sockets at or above it have no fixed address."""
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def _node_sockets(stack: psutil.Process) -> dict[int, list[tuple[str, int]]]:
    """pid -> the (address, port) of every UDP/TCP socket of each node process under the supervisor."""
    sockets = {}
    for child in stack.children(recursive=True):
        try:
            sockets[child.pid] = [(c.laddr.ip, c.laddr.port) for c in child.net_connections(kind="inet") if c.laddr]
        except psutil.NoSuchProcess:
            continue
    return sockets


@pytest.mark.ros
def test_every_receiving_dds_socket_is_bound_to_loopback(ros_domain_id, tmp_path):
    log = (tmp_path / "up.log").open("w")
    up = subprocess.Popen(["homiebot", "up", "--set", "planner.backend=random",
                           "--set", f"emmoe_evaluator.out_dir={tmp_path / 'runs'}"], cwd=ROOT, text=True,
                          stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        discovery_ports = range(PORT_BASE + DOMAIN_GAIN * ros_domain_id + DISCOVERY_UNICAST_OFFSET,
                                PORT_BASE + DOMAIN_GAIN * ros_domain_id + DISCOVERY_UNICAST_OFFSET + 2 * 64, 2)
        stack = psutil.Process(up.pid)
        deadline = time.monotonic() + 90
        sockets: dict[int, list[tuple[str, int]]] = {}
        while time.monotonic() < deadline:
            sockets = _node_sockets(stack)
            joined = [pid for pid, bound in sockets.items() if any(port in discovery_ports for _, port in bound)]
            if len(joined) >= NODE_PROCESSES:
                break
            assert up.poll() is None, (tmp_path / "up.log").read_text()
            time.sleep(1)
        assert len(joined) >= NODE_PROCESSES, sockets
        low = _ephemeral_low()
        for pid, bound in sockets.items():
            fixed = [(address, port) for address, port in bound if port < low]
            assert fixed and all(ipaddress.ip_address(address).is_loopback for address, _ in fixed), (pid, bound)
            # Only rmw_fastrtps's own send-only UDP transport (LOCALHOST range) binds elsewhere: at most one
            # kernel-assigned port per interface address, never a fixed, discoverable one.
            elsewhere = [(address, port) for address, port in bound if not ipaddress.ip_address(address).is_loopback]
            assert len(elsewhere) <= 2 and all(port >= low for _, port in elsewhere), (pid, bound)
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(timeout=30)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
        log.close()
