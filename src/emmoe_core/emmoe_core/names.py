"""The EMMOE alias table: which names a planner may use for each object and piece of furniture.

The table (`data/name_dict.txt`, from the EMMOE release) lists canonical entries (YCB objects,
ReplicaCAD furniture) each with its aliases. One alias can belong to several entries ("can",
"box", "fridge"), so a name resolves to a *set* of canonical entries. Names compare
case-insensitively and treat `_` and spaces alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

from emmoe_core.json_text import TextFileError, read_text_file


def normalize(name: str) -> str:
    """Lower-case, `_` as space, single spaces, trimmed: "Brown_Table " -> "brown table"."""
    return " ".join(name.replace("_", " ").lower().split())


class AliasTableError(ValueError):
    """The alias file is malformed; the message names the file and line."""


@dataclass(frozen=True)
class AliasTable:
    """Canonical entries and their aliases, with lookups by normalised name.

    Attributes:
        aliases: canonical entry -> its aliases as written in the file (may be empty).
    """

    aliases: dict[str, tuple[str, ...]]
    _index: dict[str, frozenset[str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, set[str]] = {}
        for canonical, names in self.aliases.items():
            for name in (canonical, *names):
                index.setdefault(normalize(name), set()).add(canonical)
        object.__setattr__(self, "_index", {key: frozenset(value) for key, value in index.items()})

    def canonicals(self, name: str) -> frozenset[str]:
        """Every canonical entry `name` may refer to (empty when the table does not know it)."""
        return self._index.get(normalize(name), frozenset())

    def knows(self, name: str) -> bool:
        """Whether `name` is a canonical entry or an alias of one."""
        return bool(self.canonicals(name))

    def same(self, first: str, second: str) -> bool:
        """Whether two names can refer to the same entry (equal after normalising, or a shared canonical)."""
        if normalize(first) == normalize(second):
            return True
        return bool(self.canonicals(first) & self.canonicals(second))

    def matches(self, name: str, canonical: str) -> bool:
        """Whether `name` can refer to the canonical entry `canonical`."""
        return canonical in self.canonicals(name) or normalize(name) == normalize(canonical)


def parse_alias_text(text: str, source: str = "<text>") -> AliasTable:
    """Parse the name_dict format: `canonical:` line, alias line (`a/b/c`, may be empty), blank line."""
    aliases: dict[str, tuple[str, ...]] = {}
    lines = [line.rstrip("\r") for line in text.split("\n")]
    number = 0
    while number < len(lines):
        line = lines[number].strip()
        number += 1
        if not line or line.startswith("#"):
            continue
        if not line.endswith(":"):
            raise AliasTableError(f"{source}:{number}: expected 'canonical_name:', found {line!r}")
        canonical = line[:-1].strip()
        alias_line = lines[number].strip() if number < len(lines) else ""
        if alias_line.endswith(":"):
            alias_line = ""
        else:
            number += 1
        names = tuple(part.strip() for part in alias_line.split("/") if part.strip())
        aliases[canonical] = tuple(dict.fromkeys(aliases.get(canonical, ()) + names))
    return AliasTable(aliases)


def load_alias_table(path: Path | str | None = None) -> AliasTable:
    """Load an alias file; without a path, the copy shipped in this package."""
    if path is None:
        return default_alias_table()
    path = Path(path)
    try:
        text = read_text_file(path)
    except TextFileError as error:
        raise AliasTableError(f"{path}: cannot read the alias table: {error.reason}") from None
    return parse_alias_text(text, str(path))


@lru_cache(maxsize=1)
def default_alias_table() -> AliasTable:
    """The alias table shipped with emmoe_core (parsed once per process)."""
    text = resources.files("emmoe_core").joinpath("data/name_dict.txt").read_text(encoding="utf-8")
    return parse_alias_text(text, "emmoe_core/data/name_dict.txt")
