"""The stack's ROS log folder stays bounded (issue 40: ~/.ros/log grew by 588 files in an hour, never pruned)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from homiebot import ros_logs
from homiebot.supervisor import ProcessSpec, Supervisor


def make_logs(folder: Path, count: int, start: float, step: float = 60.0) -> list[Path]:
    """`count` node log files, the first modified at `start`, each next one `step` seconds later."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        path = folder / f"python_{1000 + index}_{int((start + index * step) * 1000)}.log"
        path.write_text("[INFO] a line\n")
        os.utime(path, (start + index * step, start + index * step))
        paths.append(path)
    return paths


def test_the_folder_is_the_projects_own_under_ros_home_unless_the_user_chose_one(tmp_path):
    assert ros_logs.log_directory({"HOME": str(tmp_path)}) == tmp_path / ".ros" / "log" / "homiebot"
    assert ros_logs.log_directory({"HOME": "/nowhere", "ROS_HOME": str(tmp_path / "ros")}) == \
        tmp_path / "ros" / "log" / "homiebot"
    assert ros_logs.log_directory({"HOME": str(tmp_path), "ROS_LOG_DIR": "/mine"}) is None


def test_pruning_keeps_the_newest_files_and_none_too_old(tmp_path):
    now = time.time()
    old = make_logs(tmp_path, 3, now - 30 * 86400)  # a month old
    recent = make_logs(tmp_path, 20, now - 3600)  # the last hour, one a minute
    (tmp_path / "launch_folder").mkdir()
    (tmp_path / "notes.txt").write_text("not a log")
    (tmp_path / "link.log").symlink_to(recent[0])

    removed = ros_logs.prune(tmp_path, keep=5, max_age_days=7, now=now)

    assert removed == 3 + 15
    assert not any(path.exists() for path in old + recent[:15])
    assert all(path.exists() for path in recent[15:])
    assert (tmp_path / "launch_folder").is_dir() and (tmp_path / "notes.txt").exists()
    assert (tmp_path / "link.log").is_symlink()


def test_prepare_creates_prunes_and_names_the_folder(tmp_path):
    folder = tmp_path / ".ros" / "log" / "homiebot"
    make_logs(folder, ros_logs.KEEP_FILES + 40, time.time() - 3600, step=1.0)
    assert ros_logs.prepare({"HOME": str(tmp_path)}) == {"ROS_LOG_DIR": str(folder)}
    assert len(list(folder.glob("*.log"))) == ros_logs.KEEP_FILES
    assert ros_logs.prepare({"HOME": str(tmp_path), "ROS_LOG_DIR": str(tmp_path / "mine")}) == {}
    assert not (tmp_path / "mine").exists()


def test_supervised_processes_log_to_the_pruned_folder(tmp_path, monkeypatch):
    """Every stack process starts through the supervisor: 600 files from earlier stacks are cut to the newest 500
    and the processes get ROS_LOG_DIR."""
    monkeypatch.delenv("ROS_LOG_DIR", raising=False)
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "ros"))
    folder = tmp_path / "ros" / "log" / "homiebot"
    make_logs(folder, 600, time.time() - 7200, step=1.0)
    show = (sys.executable, "-c", "import os; print(os.environ['ROS_LOG_DIR'], flush=True)")
    with Supervisor([ProcessSpec("node", show)], echo=False) as supervisor:
        assert supervisor.wait_for_line("node", lambda line: bool(line), 30)
        assert supervisor.lines["node"][0] == str(folder)
    assert len(list(folder.glob("*.log"))) == ros_logs.KEEP_FILES


def test_a_users_ros_log_dir_is_passed_on_and_left_alone(tmp_path, monkeypatch):
    mine = tmp_path / "mine"
    make_logs(mine, 600, time.time() - 30 * 86400)
    monkeypatch.setenv("ROS_LOG_DIR", str(mine))
    show = (sys.executable, "-c", "import os; print(os.environ['ROS_LOG_DIR'], flush=True)")
    with Supervisor([ProcessSpec("node", show)], echo=False) as supervisor:
        assert supervisor.wait_for_line("node", lambda line: bool(line), 30)
        assert supervisor.lines["node"][0] == str(mine)
    assert len(list(mine.glob("*.log"))) == 600
