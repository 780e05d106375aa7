"""Domain leases: one holder per domain id on the machine, released when the holder ends (even killed)."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emmoe_core.ros_domains import NoFreeDomain, lease_domain, try_lease


def test_a_held_domain_is_not_handed_out_again(tmp_path: Path) -> None:
    first = lease_domain([7, 8], tmp_path, random.Random(1))
    second = lease_domain([7, 8], tmp_path, random.Random(1))
    assert {first.domain_id, second.domain_id} == {7, 8}
    with pytest.raises(NoFreeDomain, match="all 2 ROS domain ids are in use"):
        lease_domain([7, 8], tmp_path)
    first.release()
    first.release()  # idempotent
    with lease_domain([7, 8], tmp_path) as again:
        assert again.domain_id == first.domain_id
    assert try_lease(first.domain_id, tmp_path) is not None


def test_a_killed_holder_gives_its_domain_back(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from emmoe_core.ros_domains import try_lease; "
        f"lease = try_lease(9, Path({str(tmp_path)!r})); print('held' if lease else 'busy', flush=True); "
        "time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert try_lease(9, tmp_path) is None
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 5
    while (lease := try_lease(9, tmp_path)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert lease is not None
