"""Where the stack's node processes write their ROS 2 log files, and how many of them are kept.

Every process that initialises rclpy writes a `<executable>_<pid>_<time>.log` file into its ROS log folder, and ROS
never deletes one: a benchmark starts a stack per job and nodes restart, so ~/.ros/log grew by 588 files in an hour
(issue 40). The supervisor (homiebot.supervisor, behind `homiebot run`, `homiebot up` and `homiebot execute`) gives
its processes a folder of the project's own, `$ROS_HOME/log/homiebot` (~/.ros/log/homiebot without ROS_HOME), and
prunes it each time it starts a stack: log files older than MAX_AGE_DAYS go, and of the rest only the newest
KEEP_FILES stay. A ROS_LOG_DIR the user exported is theirs: the processes log there and nothing is deleted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

LOG_DIR_VARIABLE = "ROS_LOG_DIR"
SUBDIRECTORY = "homiebot"
KEEP_FILES = 500
MAX_AGE_DAYS = 7.0


def log_directory(environ: Mapping[str, str]) -> Path | None:
    """The stack's log folder, or None when the user chose one (ROS_LOG_DIR set)."""
    if environ.get(LOG_DIR_VARIABLE, "").strip():
        return None
    ros_home = environ.get("ROS_HOME", "").strip()
    root = Path(ros_home).expanduser() if ros_home else Path(environ.get("HOME") or Path.home()) / ".ros"
    return root / "log" / SUBDIRECTORY


def prune(directory: Path, keep: int = KEEP_FILES, max_age_days: float = MAX_AGE_DAYS,
          now: float | None = None) -> int:
    """Delete the `*.log` files directly in `directory` that are older than `max_age_days` or not among the newest
    `keep`; returns how many went. Anything else (folders, links, other files) is left alone, and a file that
    vanishes or cannot be deleted meanwhile (another stack pruning at the same time) is skipped."""
    now = time.time() if now is None else now
    files: list[tuple[float, Path]] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.name.endswith(".log") and entry.is_file(follow_symlinks=False):
                files.append((entry.stat(follow_symlinks=False).st_mtime, Path(entry.path)))
        except OSError:
            continue
    files.sort(reverse=True)  # newest first
    removed = 0
    for index, (modified, path) in enumerate(files):
        if index >= keep or now - modified > max_age_days * 86400:
            try:
                path.unlink()
                removed += 1
            except OSError:
                continue
    return removed


def prepare(environ: Mapping[str, str]) -> dict[str, str]:
    """Create and prune the stack's log folder; the variables that send the processes' logs there ({} when the user
    set ROS_LOG_DIR, or when the folder cannot be created: ROS's default then applies)."""
    directory = log_directory(environ)
    if directory is None:
        return {}
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return {}
    prune(directory)
    return {LOG_DIR_VARIABLE: str(directory)}
