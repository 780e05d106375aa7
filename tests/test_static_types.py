"""mypy --strict on the pure cores, as configured in mypy.ini (docs/architecture.md).

The first run type-checks about 60 modules and the libraries they use (about a minute on two busy cores); later runs
reuse the cache in build/mypy_cache and take a few seconds.
"""

from __future__ import annotations

import ast
import configparser
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / "mypy.ini"


def checked_modules() -> list[Path]:
    """The modules mypy.ini's `files` names (folders expanded), less those its `exclude` matches."""
    parser = configparser.ConfigParser()
    parser.read(CONFIG, encoding="utf-8")
    section = parser["mypy"]
    exclude = re.compile(section.get("exclude", "(?!)"))
    modules = []
    for entry in (item.strip() for item in section["files"].split(",")):
        if not entry:
            continue
        path = REPO / entry
        candidates = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        modules += [module for module in candidates if not exclude.search(module.relative_to(REPO).as_posix())]
    return modules


def imports_rclpy(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
        if any(name == "rclpy" or name.startswith("rclpy.") for name in names):
            return True
    return False


def test_the_checked_modules_exist_and_are_pure_cores() -> None:
    modules = checked_modules()
    assert len(modules) > 40
    missing = [str(path.relative_to(REPO)) for path in modules if not path.is_file()]
    assert not missing, f"mypy.ini names modules that do not exist (moved?): {', '.join(missing)}"
    with_ros = [str(path.relative_to(REPO)) for path in modules if imports_rclpy(path)]
    assert not with_ros, f"mypy.ini checks modules that import rclpy (not pure cores): {', '.join(with_ros)}"


def test_the_pure_cores_pass_mypy_strict() -> None:
    pytest.importorskip("mypy", reason="mypy is installed by scripts/setup.sh (requirements/lock.txt)")
    result = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(CONFIG)], cwd=REPO,
                            capture_output=True, text=True, timeout=280, check=False)
    assert result.returncode == 0, f"mypy found errors:\n{result.stdout}{result.stderr}"
