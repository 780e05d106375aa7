"""Point the ROS 2 wheels' CMake exports at this interpreter.

The message wheels ship `*__rosidl_generator_pyExport*.cmake` files that name the wheel builder's
absolute include directories (its Python headers and its numpy headers). CMake refuses a
non-existent INTERFACE_INCLUDE_DIRECTORIES entry, so building an interface package against the
wheels fails until those paths are rewritten. Only absolute paths that do not exist here and end in
a Python or numpy include directory are replaced; the relative `${..._DIR}/...` paths are kept.
Idempotent: a second run changes nothing.

Usage: python fix_ros_wheel_cmake.py VENV_DIR
"""

from __future__ import annotations

import re
import sys
import sysconfig
from pathlib import Path

PYTHON_INCLUDE = re.compile(r"/[^\";$\s]*/include/python3\.\d+")
NUMPY_INCLUDE = re.compile(r"/[^\";$\s]*/site-packages/numpy/(?:_core|core)/include")


def replacement_paths() -> tuple[str, str]:
    """This interpreter's Python include dir and the numpy include dir of the venv."""
    import numpy

    return sysconfig.get_paths()["include"], numpy.get_include()


def rewrite(text: str, python_include: str, numpy_include: str) -> str:
    """Replace the foreign include directories in one CMake file's text."""

    def fix(path: str, wanted: str) -> str:
        return path if Path(path).exists() else wanted

    text = NUMPY_INCLUDE.sub(lambda m: fix(m.group(0), numpy_include), text)
    return PYTHON_INCLUDE.sub(lambda m: fix(m.group(0), python_include), text)


def main(argv: list[str]) -> int:
    """Rewrite every generator export file under VENV_DIR/share."""
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    share = Path(argv[1]) / "share"
    python_include, numpy_include = replacement_paths()
    changed = 0
    for cmake_file in sorted(share.glob("*/cmake/*__rosidl_generator_py*Export*.cmake")):
        text = cmake_file.read_text()
        fixed = rewrite(text, python_include, numpy_include)
        if fixed != text:
            cmake_file.write_text(fixed)
            changed += 1
    print(f"[setup] ROS wheel CMake exports: {changed} file(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
