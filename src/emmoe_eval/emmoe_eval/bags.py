"""rosbag2 files of StepRecord messages (topic /emmoe/steps), read and written with the pure-Python `rosbags` library.

The emmoe_interfaces message definitions are registered from the installed package's share folder (found with
ament_index_python), on top of the ROS 2 Kilted types rosbags ships (std_msgs, sensor_msgs, ...). Both storage
formats are read: MCAP (a bare `.mcap` file or a bag folder) and sqlite3 (a `.db3` file or a bag folder).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from emmoe_core import topics
from emmoe_eval.bag_recovery import recover_messages, unfinished_bag, unfinished_bag_folders
from emmoe_eval.records import RunInfo, end_reason_of, is_end_marker, run_info_from_record, step_from_record
from emmoe_core.json_text import shown
from emmoe_eval.runs import END_REASONS, INFRASTRUCTURE_ERROR, Run, Step

STEPS_TOPIC = topics.STEPS_TOPIC
STEP_RECORD_TYPE = "emmoe_interfaces/msg/StepRecord"
STORAGES: tuple[str, ...] = ("mcap", "sqlite3")


class BagError(ValueError):
    """A bag cannot be read or written; the message names the bag."""


def interface_definitions_dir() -> Path:
    """The installed emmoe_interfaces `msg/` folder.

    Raises:
        BagError: when the package is not installed or on the ament index (source env.sh).
    """
    from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

    try:
        share = Path(get_package_share_directory("emmoe_interfaces"))
    except (PackageNotFoundError, LookupError, ValueError) as error:
        raise BagError(f"cannot find the emmoe_interfaces package on the ament index ({error}); "
                       "source env.sh (or your ROS 2 workspace's setup) first") from None
    folder = share / "msg"
    if not folder.is_dir():
        raise BagError(f"{folder}: the emmoe_interfaces message definitions are missing; rebuild the workspace")
    return folder


@lru_cache(maxsize=1)
def typestore() -> Any:
    """A rosbags Typestore with the ROS 2 Kilted types and every emmoe_interfaces message."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_KILTED)
    types: dict[str, Any] = {}
    for definition in sorted(interface_definitions_dir().glob("*.msg")):
        types.update(get_types_from_msg(definition.read_text(encoding="utf-8"),
                                        f"emmoe_interfaces/msg/{definition.stem}"))
    store.register(types)
    return store


def _header(stamp_ns: int) -> Any:
    types = typestore().types
    stamp = types["builtin_interfaces/msg/Time"](sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)
    return types["std_msgs/msg/Header"](stamp=stamp, frame_id="")


def serialize_record(record: Any) -> bytes:
    """The CDR bytes of a rosbags StepRecord."""
    return bytes(typestore().serialize_cdr(record, STEP_RECORD_TYPE))


def end_marker_record(info: RunInfo, step: int, end_reason: str, error_msg: str = "", stamp_ns: int = 0) -> Any:
    """A run-end marker StepRecord (rosbags dataclass): no subtask, the run's end reason."""
    types = typestore().types
    return types[STEP_RECORD_TYPE](
        header=_header(stamp_ns), episode_id=info.episode_id, instruction=info.instruction, run_index=info.run_index,
        step=step, planner=info.planner, observation_mode=info.observation_mode, raw_output="", analysis="",
        subtask=types["emmoe_interfaces/msg/Subtask"](action="", target="", place="", model=""),
        inventory_before=[], inventory_after=[], success=False, error_code=0, error_type="", feedback="",
        error_msg=error_msg, target_instance="", target_canonical="", place_instance="", place_canonical="",
        end_reason=end_reason, planning_seconds=0.0, execution_seconds=0.0, views=[], visible=[])


def record_from_step(step: Step, info: RunInfo, views: Sequence[np.ndarray] = (),
                     stamp_ns: int = 0, inventory_before: Sequence[str] = ()) -> Any:
    """A StepRecord (rosbags dataclass) for a trajectory step: the inverse of `records.step_from_record`.

    Args:
        step: the step.
        info: the run it belongs to.
        views: RGB uint8 arrays (front, left, back, right) to embed as sensor_msgs/Image (rgb8).
        stamp_ns: header stamp.
        inventory_before: held objects before the step.
    """
    types = typestore().types
    header = _header(stamp_ns)
    images = []
    for view in views:
        pixels = np.ascontiguousarray(view, dtype=np.uint8)
        height, width = pixels.shape[:2]
        images.append(types["sensor_msgs/msg/Image"](
            header=header, height=height, width=width, encoding="rgb8", is_bigendian=0, step=width * 3,
            data=pixels.reshape(-1)))
    extra = step.extra or {}
    return types[STEP_RECORD_TYPE](
        header=header, episode_id=info.episode_id, instruction=info.instruction, run_index=info.run_index,
        step=step.step, planner=info.planner, observation_mode=info.observation_mode,
        raw_output=step.raw_output or "", analysis=step.analysis or "",
        subtask=types["emmoe_interfaces/msg/Subtask"](action=step.action, target=step.target, place=step.place,
                                                      model=step.model),
        inventory_before=list(inventory_before), inventory_after=list(step.inventory or ()), success=step.success,
        error_code=0, error_type=step.error_type or "", feedback=step.feedback or "", error_msg="",
        target_instance=step.target_instance, target_canonical=step.target_canonical,
        place_instance=step.place_instance, place_canonical=step.place_canonical, end_reason=step.end_reason or "",
        planning_seconds=float(extra.get("planning_seconds", 0.0)),
        execution_seconds=float(extra.get("execution_seconds", 0.0)), views=images,
        visible=[types["emmoe_interfaces/msg/VisibleObjects"](
            view=view, names=list(names), locations=list((step.locations or {}).get(view, ())))
            for view, names in (step.visible or {}).items()])


class StepBagWriter:
    """Writes StepRecords on /emmoe/steps into a new rosbag2 file.

    With storage "mcap" the result is one bare MCAP file at `path` (as `ros2 bag play file.mcap` and rosbags read
    it); while writing it lives in a sibling `<name>.partial/` folder. With "sqlite3" `path` is a bag folder.
    """

    def __init__(self, path: Path | str, storage: str = "mcap") -> None:
        """Open the bag.

        Raises:
            BagError: when `path` exists already or the storage is unknown.
        """
        from rosbags.rosbag2 import StoragePlugin, Writer

        if storage not in STORAGES:
            raise BagError(f"unknown bag storage {storage!r}; expected one of {', '.join(STORAGES)}")
        self.path = Path(path)
        if self.path.exists():
            raise BagError(f"{self.path}: exists already, not overwriting")
        self._storage = storage
        self._folder = self.path.with_name(self.path.name + ".partial") if storage == "mcap" else self.path
        if storage == "mcap" and self._folder.exists():
            shutil.rmtree(self._folder)
        plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
        self._writer: Any = Writer(self._folder, version=9, storage_plugin=plugin)
        self._writer.open()
        self._connection = self._writer.add_connection(STEPS_TOPIC, STEP_RECORD_TYPE, typestore=typestore())

    def write_serialized(self, data: bytes | memoryview, stamp_ns: int) -> None:
        """Append one CDR-serialised StepRecord (e.g. the bytes an rclpy raw subscription delivers)."""
        self._writer.write(self._connection, stamp_ns, data)

    def write_record(self, record: Any, stamp_ns: int | None = None) -> None:
        """Serialise and append a rosbags StepRecord (stamp: its header's, else now)."""
        if stamp_ns is None:
            stamp_ns = record.header.stamp.sec * 1_000_000_000 + record.header.stamp.nanosec or time.time_ns()
        self.write_serialized(typestore().serialize_cdr(record, STEP_RECORD_TYPE), stamp_ns)

    def close(self) -> Path:
        """Finish the bag and return its path (idempotent)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            if self._storage == "mcap":
                (self._folder / f"{self._folder.name}.mcap").rename(self.path)
                shutil.rmtree(self._folder)
        return self.path

    def __enter__(self) -> StepBagWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()


@dataclass
class BagRuns:
    """The runs found in bags, with their run-level info and warnings."""

    runs: list[Run] = field(default_factory=list)
    infos: dict[tuple[str, int], RunInfo] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def read_bag_runs(paths: Sequence[Path | str], topic: str = STEPS_TOPIC) -> BagRuns:
    """Read the runs recorded in bags: StepRecords grouped by (episode_id, run_index), in message order.

    A step 1 arriving for a run that already has steps starts that run again (the earlier steps are dropped with a
    warning), as the evaluator node does. A damaged or unfinished MCAP bag (`<name>.partial/` left by a writer that
    stopped) is read up to its last complete message, with a warning. A run whose records hold no end marker (no
    record with an end reason: the recording never finished, or its end was lost) ends with reason "error": never a
    planner result. A finished bag with nothing readable in `<exp>/<task>/<run>/` counts as a failed (corrupt) run of
    that task, an unfinished one as an infrastructure failure; neither goes missing.

    Raises:
        BagError: when the emmoe_interfaces definitions cannot be found.
    """
    store = typestore()
    grouped = _GroupedSteps()
    found = BagRuns()
    for raw_path in paths:
        path = Path(raw_path)
        unfinished = unfinished_bag(path)
        records, problem = (_read_unfinished(unfinished, topic, store) if unfinished is not None
                            else _read_records(path, topic, store))
        if problem:
            found.problems.append(f"{path}: {problem}")
        if records:
            for record in records:
                grouped.take(record, path, found)
        elif problem and path.parent.name.isdigit():
            key = (path.parent.parent.name, int(path.parent.name))
            grouped.unreadable[key] = (path, unfinished is not None)
            found.problems[-1] += ("; the run never finished: an infrastructure failure, not a planner result"
                                   if unfinished is not None else "; the run counts as failed")
    found.runs = grouped.runs()
    return found


def with_unfinished_bags(paths: Sequence[Path]) -> tuple[list[Path], list[str]]:
    """The named bags, then the unfinished bags (`<name>.mcap.partial/`) of the other run folders of the experiments
    the named ones are in (`<exp>/<task>/<run>/<bag>`): a glob of finished bags (`runs/exp/*/*/episode.mcap`) never
    names the run of a writer that stopped, which would otherwise vanish from the scores without a word.

    Returns:
        (the bags to read, a line naming each bag added).
    """
    named = {Path(path).parent for path in paths}
    experiments = sorted({Path(path).parent.parent.parent for path in paths if Path(path).parent.name.isdigit()})
    added = [folder for experiment in experiments for run_dir in sorted(experiment.glob("*/*"))
             if run_dir not in named and run_dir.name.isdigit() for folder in unfinished_bag_folders(run_dir)]
    return [*map(Path, paths), *added], [f"{folder}: an unfinished bag beside the named ones; read too"
                                         for folder in added]


def _read_records(path: Path, topic: str, store: Any) -> tuple[list[Any], str]:
    """The StepRecords of one bag and a problem ("" if none); a damaged MCAP file falls back to recovery."""
    from rosbags.highlevel import AnyReader

    try:
        with AnyReader([path], default_typestore=store) as reader:
            connections = [connection for connection in reader.connections
                           if connection.topic == topic and connection.msgtype == STEP_RECORD_TYPE]
            records = [reader.deserialize(data, connection.msgtype)
                       for connection, _, data in reader.messages(connections=connections)]
            return records, "" if connections else f"no {STEP_RECORD_TYPE} messages on {topic}"
    except Exception as error:  # rosbags raises many types for damaged files: report them, never crash
        if path.is_file() and path.suffix == ".mcap":
            return _recover(path, topic, store, f"is damaged ({type(error).__name__})")
        return [], f"cannot read the bag ({type(error).__name__}: {error})"


def _read_unfinished(folder: Path, topic: str, store: Any) -> tuple[list[Any], str]:
    """The StepRecords recovered from the MCAP file in a writer's `.partial/` folder, and the problem."""
    bag = next(iter(sorted(folder.glob("*.mcap"))), None)
    if bag is None:
        return [], f"the bag was not finished by its writer, and {folder.name} holds no MCAP file"
    return _recover(bag, topic, store, "was not finished by its writer")


def _recover(path: Path, topic: str, store: Any, what: str) -> tuple[list[Any], str]:
    recovered = recover_messages(path, topic)
    records = []
    for _, data in recovered.messages:
        try:
            records.append(store.deserialize_cdr(data, STEP_RECORD_TYPE))
        except Exception:  # a message cut or garbled inside: the rest of the bag is not trusted either
            break
    stopped = f" (reading stopped at: {recovered.stopped_by})" if recovered.stopped_by else ""
    return records, f"the bag {what}; {len(records)} complete StepRecord(s) recovered from {path.name}{stopped}"


@dataclass
class _GroupedSteps:
    """Steps grouped into runs while records arrive in bag order."""

    steps: dict[tuple[str, int], list[Step]] = field(default_factory=dict)
    ends: dict[tuple[str, int], tuple[str, str]] = field(default_factory=dict)
    sources: dict[tuple[str, int], Path] = field(default_factory=dict)
    unreadable: dict[tuple[str, int], tuple[Path, bool]] = field(default_factory=dict)  # (bag, unfinished)

    def take(self, record: Any, path: Path, found: BagRuns) -> None:
        info = run_info_from_record(record)
        run_steps = self.steps.setdefault(info.key, [])
        found.infos[info.key] = info
        self.sources[info.key] = path
        reason = end_reason_of(record)
        if reason in END_REASONS:
            self.ends[info.key] = (reason or "", getattr(record, "error_msg", ""))
        elif reason is not None:
            found.problems.append(f"{path}: episode {info.episode_id} run {info.run_index}: unknown end reason "
                                  f"{shown(reason)}; ignored")
        if is_end_marker(record):
            return
        step = step_from_record(record)
        if step.step == 1 and run_steps:
            found.problems.append(f"{path}: episode {info.episode_id} run {info.run_index} starts again; "
                                  f"its earlier {len(run_steps)} step(s) are dropped")
            run_steps.clear()
            self.ends.pop(info.key, None)
        run_steps.append(step)

    def runs(self) -> list[Run]:
        runs = []
        for key, run_steps in self.steps.items():
            end_reason, error_msg = self.ends.get(key, (INFRASTRUCTURE_ERROR, f"{self.sources[key]} holds no end "
                                                        "marker of the run (its recording never finished, or its end "
                                                        "was lost)"))
            run = Run(task_id=key[0], run_id=str(key[1]), steps=run_steps, source=self.sources[key],
                      end_reason=end_reason, error_msg=error_msg)
            for previous, current in zip(run_steps, run_steps[1:]):
                if current.step != previous.step + 1:
                    run.problems.append(f"{self.sources[key]}: episode {key[0]} run {key[1]}: step {current.step} "
                                        f"follows step {previous.step}")
            runs.append(run)
        runs += [Run(task_id=key[0], run_id=str(key[1]), steps=[], source=path, corrupt=not unfinished,
                     end_reason=INFRASTRUCTURE_ERROR if unfinished else None,
                     error_msg=f"{path}: an unfinished bag with no complete StepRecord" if unfinished else "")
                 for key, (path, unfinished) in self.unreadable.items() if key not in self.steps]
        return runs
