"""Choose MuJoCo's headless OpenGL platform before mujoco is imported: EGL, else OSMesa.

MuJoCo and PyOpenGL fix their platform when first imported, so the choice must happen earlier. `MUJOCO_GL` set by
the user (env.sh sets `egl`) is respected; when it is unset, EGL is probed in a child process and OSMesa is used when
EGL does not work.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, MutableMapping

_EGL_PROBE = "from mujoco.egl import GLContext; context = GLContext(8, 8); context.make_current(); context.free()"


def egl_works() -> bool:
    """Whether an EGL context can be created (checked in a child process, so this one stays unconfigured)."""
    environ = dict(os.environ, MUJOCO_GL="egl", PYOPENGL_PLATFORM="egl")
    try:
        result = subprocess.run([sys.executable, "-c", _EGL_PROBE], env=environ, capture_output=True, timeout=60,
                                check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def configure_gl_platform(environ: MutableMapping[str, str] | None = None,
                          probe: Callable[[], bool] = egl_works) -> str:
    """Set MUJOCO_GL (and PYOPENGL_PLATFORM for OSMesa) in `environ` unless the user chose; returns the platform.

    Does nothing useful once mujoco has been imported: the platform is then already fixed.
    """
    environ = os.environ if environ is None else environ
    chosen = environ.get("MUJOCO_GL", "").strip().lower()
    if not chosen:
        chosen = "egl" if probe() else "osmesa"
        environ["MUJOCO_GL"] = chosen
    if chosen == "osmesa":
        environ.setdefault("PYOPENGL_PLATFORM", "osmesa")
    return chosen
