"""The packages form a clean stack, and every package declares what its modules import.

Layers, bottom to top (docs/architecture.md): emmoe_interfaces -> emmoe_core -> emmoe_eval -> habitat_bridge |
homiebot_planner | homiebot_executor -> homiebot. A module may import its own package and the packages of lower layers, never one of
its own layer or above. Every project package and every ROS 2 package (one on the ament index) that a module imports
must be a dependency in its package.xml, and so must the Python libraries that have a rosdep key (numpy, ...).
Every import statement of the installed package code counts, also those inside functions; tests are not checked.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
LAYERS: dict[str, int] = {"emmoe_interfaces": 0, "emmoe_core": 1, "emmoe_eval": 2, "habitat_bridge": 3,
                          "homiebot_planner": 3, "homiebot_executor": 3, "homiebot": 4}
# Python libraries with a rosdep key: import name -> the key package.xml lists.
ROSDEP_KEYS: dict[str, str] = {"numpy": "python3-numpy", "scipy": "python3-scipy", "yaml": "python3-yaml",
                               "PIL": "python3-pil", "cv2": "python3-opencv", "matplotlib": "python3-matplotlib"}


def package_dependencies(package: str) -> set[str]:
    """Every dependency named in a package's package.xml (all *depend tags but test_depend)."""
    root = ET.parse(SRC / package / "package.xml").getroot()
    return {element.text.strip() for element in root if element.tag.endswith("depend")
            and element.tag != "test_depend" and element.text}


def package_modules(package: str) -> Iterator[Path]:
    """The Python modules of an ament_python package (its importable code, not its tests)."""
    yield from sorted((SRC / package / package).rglob("*.py"))


def imported_top_levels(path: Path) -> Iterator[tuple[int, str]]:
    """(line, top-level module) of every absolute import in a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]


def ros_packages() -> set[str]:
    """Packages on the ament index (ROS 2 packages and this workspace's)."""
    try:
        from ament_index_python.packages import get_packages_with_prefixes
    except ImportError:
        return set()
    return set(get_packages_with_prefixes())


def python_packages() -> list[str]:
    return [package for package in LAYERS if (SRC / package / package).is_dir()]


def test_the_layers_cover_every_package() -> None:
    found = {path.parent.name for path in SRC.glob("*/package.xml")}
    assert found == set(LAYERS), "a package was added or removed: give it a layer here and in docs/architecture.md"


def test_no_package_imports_one_beside_or_above_it() -> None:
    violations = []
    for package in python_packages():
        for path in package_modules(package):
            for line, name in imported_top_levels(path):
                if name in LAYERS and name != package and LAYERS[name] >= LAYERS[package]:
                    violations.append(f"{path.relative_to(REPO)}:{line}: {package} (layer {LAYERS[package]}) imports "
                                      f"{name} (layer {LAYERS[name]})")
    assert not violations, "imports against the layer order:\n" + "\n".join(violations)


def test_every_imported_package_is_a_declared_dependency() -> None:
    ros = ros_packages()
    if not ros:
        pytest.skip("the ament index is empty: source env.sh to know which imports are ROS 2 packages")
    stdlib = set(sys.stdlib_module_names)
    missing = []
    for package in python_packages():
        declared = package_dependencies(package)
        for path in package_modules(package):
            for line, name in sorted(set(imported_top_levels(path))):
                if name == package or name in stdlib:
                    continue
                key = ROSDEP_KEYS.get(name, name if name in ros or name in LAYERS else None)
                if key is not None and key not in declared:
                    missing.append(f"{path.relative_to(REPO)}:{line}: imports {name}; {package}/package.xml does not "
                                   f"depend on {key}")
    assert not missing, "undeclared dependencies:\n" + "\n".join(missing)


def test_the_checker_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = tmp_path / "sample.py"
    module.write_text("import os\nfrom . import sibling\n\ndef late():\n    from homiebot.cli import main\n",
                      encoding="utf-8")
    assert list(imported_top_levels(module)) == [(1, "os"), (5, "homiebot")]
    assert os.sep not in "".join(name for _, name in imported_top_levels(module))
