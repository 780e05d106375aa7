"""Every topic, service and action name of the stack is spelled in emmoe_core.topics only: no package module
(tests aside) writes one as a string literal, so no node imports its names from another node."""

from __future__ import annotations

import ast
from pathlib import Path

from emmoe_core import topics

SRC = Path(__file__).resolve().parents[2]
# Namespaces of the stack's names: a literal starting with one of them (and holding no space) is a name.
PREFIXES = ("/emmoe/", "/sim/", "/skills/", "/head_camera/", "/subtask/")


def _names() -> set[str]:
    return {value for key, value in vars(topics).items()
            if key.isupper() and isinstance(value, str) and value.startswith("/")}


def _looks_like_a_name(text: str, names: set[str]) -> bool:
    return text in names or (text.startswith(PREFIXES) and " " not in text)


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    """String constants and the leading text of f-strings (`f"/head_camera/{view}"` -> "/head_camera/")."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
            found.append((node.lineno, str(node.values[0].value)))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
    return found


def test_names_are_only_spelled_in_topics():
    names = _names()
    assert {"/emmoe/steps", "/subtask", "/sim/query_scene", "/emmoe/run_task"} <= names
    offenders = []
    for package in sorted(path for path in SRC.iterdir() if (path / "package.xml").is_file()):
        for module in sorted((package / package.name).rglob("*.py")):
            if module.name == "topics.py":
                continue
            for line, text in _literals(ast.parse(module.read_text(encoding="utf-8"))):
                if _looks_like_a_name(text, names):
                    offenders.append(f"{module.relative_to(SRC)}:{line}: {text!r}")
    assert not offenders, "import these names from emmoe_core.topics:\n" + "\n".join(offenders)
