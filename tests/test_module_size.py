"""No Python module under src/ is longer than 500 lines (code and tests alike), so each reads in one sitting.

Generated code and data tables would be exempt, each with its reason in EXEMPT; today there are none.
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINES = 500
# Path relative to the repository -> why it may be longer (generated code or a data table only).
EXEMPT: dict[str, str] = {}
_SKIPPED_PARTS = {"__pycache__", "build", "install", "log"}


def module_lengths() -> dict[str, int]:
    """Lines of every .py file under src/, by path relative to the repository."""
    lengths = {}
    for path in sorted((REPO / "src").rglob("*.py")):
        if _SKIPPED_PARTS.intersection(path.relative_to(REPO).parts):
            continue
        with path.open("rb") as handle:
            lengths[path.relative_to(REPO).as_posix()] = sum(1 for _ in handle)
    return lengths


def test_no_module_is_over_500_lines() -> None:
    too_long = {path: lines for path, lines in module_lengths().items() if lines > MAX_LINES and path not in EXEMPT}
    assert not too_long, (f"modules over {MAX_LINES} lines (split them by responsibility): "
                          + ", ".join(f"{path} ({lines})" for path, lines in sorted(too_long.items())))


def test_exemptions_name_existing_long_files() -> None:
    lengths = module_lengths()
    stale = [path for path in EXEMPT if lengths.get(path, 0) <= MAX_LINES]
    assert not stale, f"exemptions no longer needed: {', '.join(stale)}"
