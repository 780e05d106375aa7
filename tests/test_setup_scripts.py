"""The set-up scripts: CMake export rewriting, env.sh, and the early failures of scripts/setup.sh."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import fix_ros_wheel_cmake  # noqa: E402
import uv_sources  # noqa: E402
import write_env_sh  # noqa: E402

FOREIGN_EXPORT = textwrap.dedent("""\
    set_target_properties(std_msgs::std_msgs__rosidl_generator_py PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "/opt/python/cp311-cp311/include/python3.11;/opt/python/cp311-cp311/lib/python3.11/site-packages/numpy/_core/include"
      INTERFACE_LINK_LIBRARIES "${_IMPORT_PREFIX}/../../../lib/python3.11/site-packages/std_msgs/libstd_msgs__rosidl_generator_py.so"
    )
""")


def test_foreign_include_paths_are_rewritten_and_relative_ones_kept(tmp_path):
    python_include, numpy_include = str(tmp_path / "py"), str(tmp_path / "np")
    fixed = fix_ros_wheel_cmake.rewrite(FOREIGN_EXPORT, python_include, numpy_include)
    assert f'"{python_include};{numpy_include}"' in fixed
    assert "/opt/python" not in fixed
    assert "${_IMPORT_PREFIX}/../../../lib/python3.11/site-packages/std_msgs/" in fixed
    assert fix_ros_wheel_cmake.rewrite(fixed, python_include, numpy_include) == fixed


def test_existing_include_paths_are_left_alone(tmp_path):
    existing = tmp_path / "include" / "python3.11"
    existing.mkdir(parents=True)
    text = f'INTERFACE_INCLUDE_DIRECTORIES "{existing}"'
    assert fix_ros_wheel_cmake.rewrite(text, "/elsewhere", "/elsewhere") == text


def test_uv_gets_every_source_pip_is_configured_with():
    """Extra indexes and wheel folders from every file and the environment, once each; the environment's index wins
    over the files'; TORCH_INDEX_URL comes on top."""
    settings = [(":env:", "find-links", "/opt/wheels"), (":env:", "index-url", "https://mirror/simple"),
                ("global", "index-url", "https://files/simple"), ("global", "cert", "/etc/ssl/ca.crt"),
                ("user", "find-links", "/opt/wheels"),
                ("user", "extra-index-url", "file:///opt/pypi/simple file:///opt/pypi-more/simple")]
    assert uv_sources.uv_options(settings, "https://torch/cpu") == [
        "--find-links", "/opt/wheels", "--extra-index-url", "file:///opt/pypi/simple",
        "--extra-index-url", "file:///opt/pypi-more/simple", "--extra-index-url", "https://torch/cpu", "--index-url", "https://mirror/simple"]
    assert uv_sources.uv_options([], None) == []


def test_the_venv_exports_name_no_missing_include_dirs():
    venv = Path(sys.prefix)
    exports = list((venv / "share").glob("*/cmake/*__rosidl_generator_py*Export*.cmake"))
    assert exports, "no rosidl generator exports in the venv"
    for export in exports:
        for path in fix_ros_wheel_cmake.PYTHON_INCLUDE.findall(export.read_text()):
            assert Path(path).exists(), f"{export.name} still names {path}"


def test_env_sh_keeps_dds_on_loopback_and_exposes_the_tools():
    script = write_env_sh.TEMPLATE.format(root="/repo", venv="/repo/.venv", ros_libs="/repo/.venv/lib")
    assert "export ROS_AUTOMATIC_DISCOVERY_RANGE=SYSTEM_DEFAULT" in script
    assert ('export FASTDDS_DEFAULT_PROFILES_FILE="${FASTDDS_DEFAULT_PROFILES_FILE:-'
            '/repo/install/homiebot/share/homiebot/config/fastdds_loopback.xml}"') in script
    assert "export HF_HUB_OFFLINE=1" in script and "export HF_HUB_DISABLE_TELEMETRY=1" in script
    assert "export RAY_USAGE_STATS_ENABLED=0" in script
    assert '. "/repo/install/local_setup.sh"' in script
    assert "/repo/install/homiebot/lib/homiebot" in script and "/repo/install/emmoe_eval/lib/emmoe_eval" in script


def test_sourcing_env_sh_in_a_clean_shell():
    """What a new terminal gets from `. env.sh`: discovery range, the tools, the interface types."""
    probe = ". ./env.sh && echo $ROS_AUTOMATIC_DISCOVERY_RANGE && command -v homiebot emmoe-eval python " \
            "&& python -c 'import emmoe_interfaces.msg, rclpy; print(\"imports\")' " \
            "&& python -c 'from emmoe_core.dds_guard import discovery_problem as p; print(p() or \"loopback\")'"
    clean_env = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/local/bin:/usr/bin:/bin"}
    output = subprocess.run(["bash", "-c", probe], cwd=ROOT, env=clean_env, capture_output=True, text=True,
                            check=True).stdout.split()
    assert output[0] == "SYSTEM_DEFAULT"
    assert output[1].endswith("/homiebot") and output[2].endswith("/emmoe-eval")
    assert output[3] == str(ROOT / ".venv" / "bin" / "python")
    assert output[-2:] == ["imports", "loopback"]


def run_setup(tmp_path: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"], "HOMIEBOT_SKIP_APT": "1", **environ}
    return subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], env=env, capture_output=True, text=True,
                          timeout=120)


def test_setup_refuses_another_python_before_doing_anything(tmp_path):
    fake = tmp_path / "python3.12"
    fake.write_text("#!/bin/sh\necho 3.12.1\nexit 1\n")
    fake.chmod(0o755)
    result = run_setup(tmp_path, PYTHON=str(fake))
    assert result.returncode != 0
    assert "Python 3.11 is required" in result.stderr and "3.12.1" in result.stderr
    assert "[setup] creating .venv" not in result.stdout


def test_setup_refuses_to_run_without_a_compiler(tmp_path):
    """PATH without g++ (and apt disabled): setup stops with the package to install."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for tool in Path(folder).iterdir():
            target = bin_dir / tool.name
            if tool.name not in ("g++", "c++") and not target.exists() and not tool.name.startswith("g++-"):
                target.symlink_to(tool)
    environ = {"PATH": str(bin_dir), "PYTHON": sys.executable}
    env = {"HOME": str(tmp_path), "HOMIEBOT_SKIP_APT": "1", **environ}
    result = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode != 0
    assert "g++" in result.stderr


def test_second_setup_run_skips_every_step(tmp_path):
    first = run_setup(tmp_path)  # brings a stale checkout up to date (a no-op under `make test`)
    assert first.returncode == 0, first.stderr
    result = run_setup(tmp_path)
    assert result.returncode == 0, result.stderr
    assert ".venv is up to date" in result.stdout
    assert "colcon overlay is up to date" in result.stdout
