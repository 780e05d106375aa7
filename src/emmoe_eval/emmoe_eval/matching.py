"""Keypath matching for task progress: which executed steps count as which keypath nodes.

Default rule (this project's):
- a keypath name *denotes* every alias-table entry it can refer to: the entries that list it as an alias or are
  named by it (`box` denotes 003_cracker_box, 004_sugar_box, 008_pudding_box and 009_gelatin_box; `cracker_box`
  denotes 003_cracker_box alone), plus the name itself after normalising (case, `_` and spaces alike);
- a step with a resolved identity (the executor recorded the instance and canonical entry the written name resolved
  to) matches a node's name when its canonical entry is one the name denotes, or when its instance name is the
  node's name, with or without the `_<n>` instance suffix (`cracker_box_0` is `cracker_box`);
- a step without one (the release's conversations, older runs) matches when its written name equals the node's name
  after normalising, or when every entry the written name can refer to is denoted by the node's name (so a step
  that wrote `box` matches the node `box` but not the node `cracker_box`: it may have picked any box; `fridge`
  matches `refrigerator`, both naming the same two entries);
- actions compare exactly; an End node matches any End step; a node without a place needs a step without one.

Official rule (`--compat official`, the released notebooks): one canonical per alias, the table read in file
order with the last listing winning (`box` -> 009_gelatin_box, `can` -> 010_potted_meat_can); step names
lower-cased and stripped, keypath names only stripped, both looked up exactly (no normalising) and compared by
canonical. A keypath name missing from that table raises (the notebooks stop with KeyError); a step name missing
from it never matches (the notebooks would stop as well).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from emmoe_eval.dataset import Keypath
from emmoe_core.names import AliasTable, normalize
from emmoe_core.protocol import SubtaskText
from emmoe_eval.runs import Step

_INSTANCE_SUFFIX = re.compile(r"[_ ]\d+$")
_NONE = "None"


class ScoringError(ValueError):
    """The data cannot be scored in the requested mode (e.g. an unknown keypath target with --compat official)."""


_NameKey = tuple[str, frozenset[str]]


def release_name_table(table: AliasTable) -> dict[str, str]:
    """The notebooks' `mapping_dict`: alias as written -> canonical, file order, the last listing wins.

    An entry with an empty alias line maps the empty name, as the notebooks' `''.split('/')` does.
    """
    mapping: dict[str, str] = {}
    for canonical, aliases in table.aliases.items():
        for alias in aliases or ("",):
            mapping[alias] = canonical
    return mapping


class NameIndex:
    """Normalised form and denoted entries of each name, and the identity of each step, computed once each."""

    def __init__(self, table: AliasTable) -> None:
        self.table = table
        self._keys: dict[str, _NameKey] = {}
        self._release: dict[str, str] | None = None

    def key(self, name: str) -> _NameKey:
        """(normalised name, the canonical entries it denotes)."""
        found = self._keys.get(name)
        if found is None:
            found = (normalize(name), self.table.canonicals(name))
            self._keys[name] = found
        return found

    @property
    def release(self) -> dict[str, str]:
        """The release's alias -> canonical dictionary (`release_name_table`), built on first use."""
        if self._release is None:
            self._release = release_name_table(self.table)
        return self._release


def _instance_names(instance: str) -> tuple[str, ...]:
    """The normalised instance name, and without its `_<n>` suffix."""
    if not instance:
        return ()
    full = normalize(instance)
    return (full, normalize(_INSTANCE_SUFFIX.sub("", instance)))


def _name_matches(node: _NameKey, written: str, instance: str, canonical: str, names: NameIndex) -> bool:
    """Whether a step's name (written, resolved instance and canonical) matches a node's name (default rule)."""
    node_name, denoted = node
    if instance or canonical:
        return canonical in denoted or node_name in _instance_names(instance)
    step_name, candidates = names.key(written)
    if step_name == node_name:
        return True
    return bool(candidates) and candidates <= denoted


class KeypathMatcher:
    """Task progress of runs against one task's keypaths."""

    def __init__(self, task_id: str, keypaths: Sequence[Keypath], names: NameIndex, reject_unknown: bool = False,
                 official: bool = False) -> None:
        """Compile the keypaths.

        Args:
            task_id: for messages.
            keypaths: the task's keypaths.
            names: the shared name index.
            reject_unknown: raise for keypath names the alias table does not know (quirk 3).
            official: match as the released notebooks do (implies reject_unknown, with their exact lookup).

        Raises:
            ScoringError: for an unknown name when `reject_unknown` or `official`, or when there are no keypaths.
        """
        if not keypaths:
            raise ScoringError(f"task {task_id}: no keypaths")
        self._names = names
        self._official = official
        for path_number, keypath in enumerate(keypaths, start=1):
            for node_number, node in enumerate(keypath, start=1):
                unknown = _unknown_names(node, names, official) if official or reject_unknown else []
                if unknown:
                    raise ScoringError(
                        f"task {task_id}: keypath {path_number}, node {node_number} ({node}): {unknown[0]!r} is not "
                        "in the alias table (the released notebooks fail here; drop --compat official to "
                        "count it as a plain name)")
        if official:
            release = names.release
            self._official_paths = [
                tuple((node.action, release.get(node.target.strip(), _NONE),
                       release[node.place.strip()] if node.place else _NONE) for node in keypath)
                for keypath in keypaths]
        self._paths = [tuple((node.action, names.key(node.target), names.key(node.place)) for node in keypath)
                       for keypath in keypaths]

    def progress(self, steps: Iterable[Step]) -> float:
        """TP: the best fraction of a keypath matched greedily, in order, by the successful steps."""
        done = [step for step in steps if step.success]
        if self._official:
            release = self._names.release
            keys = [(step.action, release.get(step.target.strip().lower()) if step.target.strip() else None,
                     release.get(step.place.strip().lower()) if step.place.strip() else _NONE) for step in done]
            return _best_progress(self._official_paths, keys, lambda key, node: key[1] is not None
                                  and key[1] == node[1] and key[2] == node[2])
        names = self._names
        return _best_progress(self._paths, [(step.action, step) for step in done], lambda item, node: (
            _name_matches(node[1], item[1].target, item[1].target_instance, item[1].target_canonical, names)
            and _place_matches(node[2], item[1], names)))


def _best_progress(paths: Sequence[tuple[Any, ...]], items: Sequence[Any],
                   same_object: Callable[[Any, Any], bool]) -> float:
    """The best fraction of a path matched greedily, in order, by the items.

    A path node and an item are (action, ...) tuples; they match when the actions are equal and the node is End or
    `same_object(item, node)`.
    """
    best = 0.0
    for path in paths:
        matched = 0
        for item in items:
            node = path[matched]
            if item[0] == node[0] and (node[0] == "End" or same_object(item, node)):
                matched += 1
                if matched == len(path):
                    break
        best = max(best, matched / len(path))
        if best == 1.0:
            break
    return best


def _unknown_names(node: SubtaskText, names: NameIndex, official: bool) -> list[str]:
    """The node's names the table does not know: exactly as the notebooks look them up, or after normalising."""
    if official:
        if node.action == "End":
            return []
        wanted = [node.target.strip()] + ([node.place.strip()] if node.place else [])
        return [name for name in wanted if not name or name not in names.release]
    return [name for name in (node.target, node.place) if name and not names.table.knows(name)]


def _place_matches(node_place: _NameKey, step: Step, names: NameIndex) -> bool:
    if not node_place[0]:
        return not step.place and not step.place_instance
    if not step.place and not step.place_instance:
        return False
    return _name_matches(node_place, step.place, step.place_instance, step.place_canonical, names)
