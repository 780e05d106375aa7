"""The workspace has the seven packages of docs/architecture.md, each with a valid manifest and the standard layout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from catkin_pkg.package import parse_package

ROOT = Path(__file__).resolve().parents[1]
PYTHON_PACKAGES = ("emmoe_core", "emmoe_eval", "homiebot_planner", "homiebot_executor", "habitat_bridge", "homiebot")
ALL_PACKAGES = ("emmoe_interfaces", *PYTHON_PACKAGES)


@pytest.mark.parametrize("name", ALL_PACKAGES)
def test_package_xml_is_valid_format_3(name):
    package = parse_package(str(ROOT / "src" / name / "package.xml"))  # validates; raises on errors
    assert package.name == name
    assert package.package_format == 3
    assert package.licenses == ["Apache-2.0"]


@pytest.mark.parametrize("name", PYTHON_PACKAGES)
def test_ament_python_layout(name):
    base = ROOT / "src" / name
    package = parse_package(str(base / "package.xml"))
    assert package.get_build_type() == "ament_python"
    assert (base / "resource" / name).is_file()
    assert (base / name / "__init__.py").is_file()
    assert (base / "test").is_dir()
    assert f"script_dir=$base/lib/{name}" in (base / "setup.cfg").read_text()
    depends = {dependency.name for dependency in package.exec_depends}
    assert "rclpy" in depends and "emmoe_interfaces" in depends


def test_interface_package_is_ament_cmake_rosidl():
    package = parse_package(str(ROOT / "src" / "emmoe_interfaces" / "package.xml"))
    assert package.get_build_type() == "ament_cmake"
    assert "rosidl_interface_packages" in [group.name for group in package.member_of_groups]


def test_colcon_lists_the_six_packages_and_the_interfaces_without_wheels():
    listed = subprocess.run(["colcon", "list", "--names-only", "--base-paths", str(ROOT / "src")],
                            capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    assert sorted(listed) == sorted([*ALL_PACKAGES, "control_msgs", "trajectory_msgs"])


def test_cli_entry_points_are_on_path():
    for tool in ("homiebot", "emmoe-eval"):
        found = subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True, text=True)
        assert found.returncode == 0, f"{tool} is not on PATH after sourcing env.sh"


@pytest.mark.parametrize("name", PYTHON_PACKAGES)
def test_console_scripts_resolve(name):
    """Every console script of the installed overlay points at an importable callable."""
    import importlib.metadata

    for entry_point in importlib.metadata.distribution(name).entry_points:
        if entry_point.group == "console_scripts":
            assert callable(entry_point.load()), f"{entry_point.name} -> {entry_point.value}"
