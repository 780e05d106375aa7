"""The EMMOE-100 test split (tasks 91-100) is frozen: its definitions and committed files must not change unnoticed.

The checksum covers data/tasks/emmoe_test.yaml and every file under data/test/ except the ones `homiebot collect`
writes into a task folder (the four views after each subtask, `subtask{n}_{view}.png`, and `visible.json` /
`locations.json`), so it is the same on a fresh clone and on a checkout holding collected views. It is the SHA-256 of
the text `sha256sum` prints for those files, the definitions first and then the split's files in byte order of their
paths; in a git checkout with nothing collected into data/test/ the shell gives the same digest:

    sha256sum data/tasks/emmoe_test.yaml $(git ls-files data/test) | sha256sum
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from emmoe_core.protocol import VIEWS

from emmoe_eval.dataset import LOCATIONS_FILE, VISIBLE_FILE

ROOT = Path(__file__).resolve().parents[1]
DEFINITIONS = "data/tasks/emmoe_test.yaml"
SPLIT = "data/test"
FROZEN_SINCE = "2026-12-03"
FROZEN_SHA256 = "65a3b02e85873757bdfa538c8222b1f4ae83e1feeb28b2d22e8004dd9b9faed8"

# What `homiebot collect` writes beside info.txt, keypath.json and scene.json (homiebot.collect.write_collected).
_COLLECTED_VIEW = re.compile(rf"subtask\d+_({'|'.join(VIEWS)})\.png")
_COLLECTED_TABLES = frozenset({VISIBLE_FILE, LOCATIONS_FILE})


def is_collected(path: Path) -> bool:
    """Whether `path` is one of the files `homiebot collect` generates in a task folder."""
    return path.name in _COLLECTED_TABLES or _COLLECTED_VIEW.fullmatch(path.name) is not None


def frozen_files(root: Path) -> list[str]:
    """The frozen files, as paths relative to `root`: the definitions, then the split's files in byte order."""
    split = [path.relative_to(root).as_posix() for path in (root / SPLIT).rglob("*")
             if path.is_file() and not is_collected(path)]
    return [DEFINITIONS, *sorted(split, key=str.encode)]


def split_checksum(root: Path) -> str:
    """SHA-256 of the `sha256sum` listing (`<hex>  <path>\\n` per file) of the frozen files under `root`."""
    listing = "".join(f"{hashlib.sha256((root / name).read_bytes()).hexdigest()}  {name}\n"
                      for name in frozen_files(root))
    return hashlib.sha256(listing.encode()).hexdigest()


def test_the_test_split_is_frozen() -> None:
    assert split_checksum(ROOT) == FROZEN_SHA256, (
        f"the test split (data/tasks/emmoe_test.yaml, data/test/) is frozen since {FROZEN_SINCE}, and it changed. "
        "Change it only with a reason recorded in docs/fidelity.md (section 'Frozen test split': what changed and "
        "why), then update FROZEN_SHA256 in tests/test_frozen_test_split.py. Files checked: "
        + ", ".join(frozen_files(ROOT)))


def test_collected_files_are_left_out_and_every_other_byte_counts(tmp_path: Path) -> None:
    for name in frozen_files(ROOT):
        copy = tmp_path / name
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes((ROOT / name).read_bytes())
    assert split_checksum(tmp_path) == split_checksum(ROOT)

    task = tmp_path / SPLIT / "91"
    for name in ("subtask1_front.png", "subtask12_right.png", VISIBLE_FILE, LOCATIONS_FILE):
        (task / name).write_bytes(b"collected")
    assert split_checksum(tmp_path) == split_checksum(ROOT)

    for name in ("scene.json", "subtask1_top.png", "notes.txt"):
        probe = task / name
        original = probe.read_bytes() if probe.exists() else None
        probe.write_bytes((original or b"") + b" ")
        assert split_checksum(tmp_path) != split_checksum(ROOT), name
        if original is None:
            probe.unlink()
        else:
            probe.write_bytes(original)
    definitions = tmp_path / DEFINITIONS
    original = definitions.read_bytes()
    definitions.write_bytes(original.replace(b"bowl", b"bowL", 1))
    assert split_checksum(tmp_path) != split_checksum(ROOT)
