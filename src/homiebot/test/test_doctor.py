"""homiebot doctor: each check's verdict on hand-made inputs, the report, and a real run on this machine."""

from __future__ import annotations

import json
import subprocess

from homiebot import doctor
from homiebot.doctor import Check


def test_python_check_requires_3_11():
    assert doctor.check_python((3, 11, 7)).ok
    failed = doctor.check_python((3, 12, 1))
    assert not failed.ok and failed.required and "3.12.1" in failed.detail and "3.11" in failed.fix


def test_discovery_check_requires_dds_on_loopback():
    from homiebot.bringup import dds_profile_path

    assert doctor.check_discovery_range({"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "ROS_DOMAIN_ID": "7"}).ok
    loopback = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT",
                "FASTDDS_DEFAULT_PROFILES_FILE": str(dds_profile_path())}
    assert doctor.check_discovery_range(loopback).ok
    for environ in ({}, {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"}, {"ROS_LOCALHOST_ONLY": "1"},
                    {"ROS_AUTOMATIC_DISCOVERY_RANGE": "SYSTEM_DEFAULT"},
                    {**loopback, "RMW_IMPLEMENTATION": "rmw_zenoh_cpp"}):
        check = doctor.check_discovery_range(environ)
        assert not check.ok
        assert "ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT and FASTDDS_DEFAULT_PROFILES_FILE=" in check.fix


def test_distributions_check_fails_only_for_required_wheels(monkeypatch):
    check = doctor.check_distributions(("ros-rclpy", "no-such-optional-wheel"))
    assert check.ok and "ros-rclpy " in check.detail and "not installed: no-such-optional-wheel" in check.detail

    def version(name: str) -> str:
        raise doctor.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(doctor.metadata, "version", version)
    failed = doctor.check_distributions(("ros-rclpy", "mujoco", "trl"))
    assert not failed.ok and "missing ros-rclpy, mujoco" in failed.fix


def test_gl_check_passes_with_either_backend():
    assert doctor.check_mujoco_gl(lambda backend: (backend == "osmesa", backend)).ok
    failed = doctor.check_mujoco_gl(lambda backend: (False, "no display"))
    assert not failed.ok and "libosmesa6" in failed.fix and "egl: no display" in failed.detail


def test_a_crashing_check_is_reported_not_raised():
    def check_broken() -> Check:
        raise RuntimeError("boom")

    results = doctor.run_checks((check_broken, lambda: Check("fine", True, "ok")))
    assert [(result.name, result.ok) for result in results] == [("broken", False), ("fine", True)]
    assert "boom" in results[0].detail


def test_exit_code_ignores_optional_failures():
    optional = Check("gpu", False, "none", required=False)
    assert doctor.exit_code([Check("python", True, "3.11"), optional]) == 0
    assert doctor.exit_code([Check("python", False, "3.12", fix="use 3.11"), optional]) == 1


def test_report_shows_fixes_under_failures():
    report = doctor.format_report([Check("discovery", False, "unset", fix="export X"),
                                   Check("gpu", False, "none", required=False)])
    lines = report.splitlines()
    assert lines[0].startswith("[FAIL] discovery") and lines[1].strip() == "fix: export X"
    assert lines[2].startswith("[info] gpu")
    assert lines[-1] == "1 required check(s) failed: discovery"


def test_doctor_on_this_machine_passes_every_required_check():
    """The real environment made by scripts/setup.sh (a fresh process, as a user runs it)."""
    result = subprocess.run(["homiebot", "doctor", "--json"], capture_output=True, text=True, timeout=180)
    report = json.loads(result.stdout)
    failed = [check for check in report["checks"] if check["required"] and not check["ok"]]
    assert result.returncode == 0 and report["ok"], failed
    names = {check["name"] for check in report["checks"]}
    assert {"python", "wheels", "discovery", "rmw", "overlay", "interfaces", "mujoco-gl", "small-lm"} <= names


def test_doctor_fails_with_the_fix_when_discovery_is_not_on_loopback():
    env_without_range = "unset ROS_AUTOMATIC_DISCOVERY_RANGE; homiebot doctor"
    result = subprocess.run(["bash", "-c", env_without_range], capture_output=True, text=True, timeout=180)
    assert result.returncode == 1
    assert "[FAIL] discovery" in result.stdout
    assert "fix: set ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT and FASTDDS_DEFAULT_PROFILES_FILE=" in result.stdout
