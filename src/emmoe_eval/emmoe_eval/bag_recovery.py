"""Reading what a damaged or unfinished MCAP bag still holds.

A bag whose writer stopped (an evaluator crash, a full disk) has no summary section and may end inside a record;
rosbags then refuses the whole file. The MCAP stream format needs no summary: read record by record from the
start, every complete message before the damage is still there. The `mcap` library's stream reader does that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

PARTIAL_SUFFIX = ".partial"


@dataclass
class Recovered:
    """The complete messages on one topic found in a damaged bag, and what stopped the reading (None: nothing)."""

    messages: list[tuple[int, bytes]] = field(default_factory=list)
    stopped_by: str | None = None


def unfinished_bag(path: Path) -> Path | None:
    """The `<name>.partial/` folder a bag writer left for a bag path that does not exist (or `path` itself when it
    is such a folder); None when there is none."""
    folder = path if path.name.endswith(PARTIAL_SUFFIX) else path.with_name(path.name + PARTIAL_SUFFIX)
    if folder is not path and path.exists() or not folder.is_dir():
        return None
    return folder


def unfinished_bag_folders(run_dir: Path) -> list[Path]:
    """The `<name>.mcap.partial/` folders a bag writer left in a run folder: bags it never closed."""
    return sorted(path for path in run_dir.glob(f"*.mcap{PARTIAL_SUFFIX}") if path.is_dir())


def recover_messages(path: Path, topic: str) -> Recovered:
    """(log time, serialised data) of every complete message on `topic`, read in file order up to the first damage.
    Never raises: an unreadable file gives no messages and the reason."""
    from mcap.records import Channel, Message
    from mcap.stream_reader import StreamReader

    found = Recovered()
    channels: set[int] = set()
    try:
        with path.open("rb") as stream:
            for record in StreamReader(stream, record_size_limit=1 << 30).records:
                if isinstance(record, Channel) and record.topic == topic:
                    channels.add(record.id)
                elif isinstance(record, Message) and record.channel_id in channels:
                    found.messages.append((record.log_time, bytes(record.data)))
    except Exception as error:  # any damage (truncation, bad magic, bad compression) ends the reading here
        found.stopped_by = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return found
