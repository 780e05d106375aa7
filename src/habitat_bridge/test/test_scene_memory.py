"""The simulator gives back the memory of the scenes it no longer shows (issue 40: sim_stack kept about 15 MB per
new scene, 409 -> 565 MB over 30 runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from habitat_bridge.apartment import compact_room
from habitat_bridge.backends import mujoco_backend, native_memory
from habitat_bridge.backends.mujoco_backend import MujocoBackend

REPO = Path(__file__).resolve().parents[3]

# Freed heap memory that glibc keeps resident: 100 MB of 64 kB blocks (below the mmap threshold, so they come from
# a thread's malloc arena, as the simulator's buffers do in sim_stack), all freed but the last one, which pins the
# top of the heap so that free() alone cannot shrink it.
FRAGMENTED_HEAP = """
import ctypes, sys, threading
sys.path.insert(0, sys.argv[1])
from habitat_bridge.backends.native_memory import release_free_memory

libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]

def rss_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20

def churn():
    blocks = [libc.malloc(64 * 1024) for _ in range(1600)]
    for block in blocks:
        ctypes.memset(block, 1, 64 * 1024)
    for block in blocks[:-1]:
        libc.free(block)

worker = threading.Thread(target=churn)
worker.start()
worker.join()
before = rss_mb()
released = release_free_memory()
print(released, before, rss_mb())
"""


def test_release_free_memory_hands_freed_heap_pages_back():
    source = Path(native_memory.__file__).resolve().parents[2]
    answer = subprocess.run([sys.executable, "-c", FRAGMENTED_HEAP, str(source)], capture_output=True, text=True,
                            timeout=60, check=True)
    released, before, after = answer.stdout.split()
    assert released == "True"
    assert float(before) - float(after) > 80, answer.stdout


def test_every_reset_releases_free_memory(monkeypatch):
    """A new scene frees the old one's model and data; the same scene again frees the last episode's buffers."""
    calls = []
    monkeypatch.setattr(mujoco_backend, "release_free_memory", lambda: calls.append("released") or True)
    backend = MujocoBackend()
    try:
        backend.reset(compact_room(0))
        backend.reset(compact_room(1))
        backend.reset(compact_room(1))
    finally:
        backend.close()
    assert calls == ["released"] * 3


@pytest.mark.slow
@pytest.mark.ros
def test_sim_stack_memory_stays_flat_over_a_hundred_task_scenes(tmp_path, ros_domain_id):
    """bench/bench_scene_memory.py --stack: a sim_stack process loads and observes the 100 task scenes over ROS 2
    after 5 warm-up loads and must grow by less than 50 MB (+141 MB before the fix, +14 MB after; about 40 s)."""
    results = tmp_path / "scene_memory.json"
    answer = subprocess.run([sys.executable, str(REPO / "bench" / "bench_scene_memory.py"), "--stack", "--results",
                             str(results)], capture_output=True, text=True, timeout=900, cwd=REPO)
    assert answer.returncode == 0, answer.stdout[-3000:] + answer.stderr[-3000:]
    figures = json.loads(results.read_text())["sim_stack"]
    assert figures["rss_growth_mb"] < 50 and figures["different_scenes"] == 100
