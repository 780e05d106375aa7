"""Head-camera and third-person videos of each run, as the EMMOE release records them (no rclpy).

Two image streams feed a `VideoRecorder`: `head` (the head camera's front view) and `third` (a third-person view of
the robot). The frames taken between two consecutive StepRecords of a run belong to the later step's subtask; frames
before a run's first step belong to its first subtask. Frames and StepRecords travel on different topics and may
arrive out of order, so both carry a time on one clock (their publication times) and a frame waits up to
`VideoConfig.window_s` for a StepRecord that closes the subtask before it. A frame that arrives after the StepRecord
closing its subtask (taken before that step, received after it) is dropped: its subtask's video is written, and it is
not the next subtask's. Files, next to the run's images:
- `subtask{n}_head.mp4`, `subtask{n}_third.mp4`: one per step whose subtask saw frames of that stream;
- `run_head.mp4`, `run_third.mp4`: the run's subtask videos of that stream in step order, written when the run ends.
MP4 with the `mp4v` codec (OpenCV), RGB frames in, resized to the first frame's size when sizes differ. Frames are
written to a staging file once they leave the waiting window, so memory stays flat however long a subtask runs.
"""

from __future__ import annotations

import bisect
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from emmoe_core.topics import VIDEO_TOPICS

STREAMS: tuple[str, ...] = ("head", "third")
FOURCC = "mp4v"
_VIDEO_FILE = re.compile(r"^(subtask\d+|run)_(" + "|".join(STREAMS) + r")\.mp4$")


class VideoError(RuntimeError):
    """A video file could not be written (no MP4 encoder, unwritable folder)."""


def subtask_video_name(step: int, stream: str) -> str:
    """File name of a subtask's video, e.g. `subtask3_head.mp4`."""
    return f"subtask{step}_{stream}.mp4"


def run_video_name(stream: str) -> str:
    """File name of a run's video, e.g. `run_third.mp4`."""
    return f"run_{stream}.mp4"


def video_files(run_dir: Path) -> list[Path]:
    """The video files of a run folder: the run videos first, then the subtask videos in step order."""
    found = [path for path in Path(run_dir).glob("*.mp4") if _VIDEO_FILE.match(path.name)]

    def order(path: Path) -> tuple[int, int, str]:
        prefix = path.name.split("_", 1)[0]
        step = -1 if prefix == "run" else int(prefix[len("subtask"):])
        return step, STREAMS.index(path.stem.rsplit("_", 1)[1]), path.name

    return sorted(found, key=order)


@dataclass(frozen=True)
class VideoConfig:
    """Settings of the video recorder.

    Attributes:
        fps: frame rate written into the files (the rate at which the bridge publishes the streams).
        window_s: how long a frame waits for a StepRecord published after it but received before it.
    """

    fps: float = 5.0
    window_s: float = 1.5

    def __post_init__(self) -> None:
        if not 0.1 <= self.fps <= 120.0:
            raise ValueError(f"video fps must be within [0.1, 120], got {self.fps}")
        if not 0.0 <= self.window_s <= 60.0:
            raise ValueError(f"video window_s must be within [0, 60] seconds, got {self.window_s}")


class Mp4Writer:
    """One MP4 file written frame by frame (RGB uint8 frames; all resized to the first frame's size)."""

    def __init__(self, path: Path, fps: float) -> None:
        """Open nothing yet: the file is created with the first frame, whose size fixes the video's."""
        self.path = Path(path)
        self.frames = 0
        self._fps = fps
        self._writer: Any = None
        self._size: tuple[int, int] | None = None

    def write(self, frame: np.ndarray) -> None:
        """Append one uint8 frame: (H, W, 3) RGB; grey (H, W) and RGBA (H, W, 4) frames are converted.

        Raises:
            VideoError: the file cannot be opened for writing.
            ValueError: the frame is not an RGB, RGBA or grey image.
        """
        import cv2

        if frame.ndim == 2:
            frame = np.repeat(frame[:, :, None], 3, axis=2)
        elif frame.ndim == 3 and frame.shape[2] == 4:
            frame = frame[:, :, :3]
        if frame.ndim != 3 or frame.shape[2] != 3:
            raise ValueError(f"video frames must be RGB, RGBA or grey images, got shape {frame.shape}")
        if self._writer is None:
            self._size = (int(frame.shape[1]), int(frame.shape[0]))
            self._writer = cv2.VideoWriter(str(self.path), cv2.VideoWriter.fourcc(*FOURCC), self._fps, self._size)
            if not self._writer.isOpened():
                self._writer = None
                raise VideoError(f"cannot write {self.path}: OpenCV has no {FOURCC} MP4 encoder or the folder is "
                                 "not writable")
        pixels: np.ndarray = np.ascontiguousarray(frame, dtype=np.uint8)
        if (pixels.shape[1], pixels.shape[0]) != self._size:
            pixels = cv2.resize(pixels, self._size, interpolation=cv2.INTER_AREA)
        self._writer.write(cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR))
        self.frames += 1

    def close(self) -> None:
        """Finish the file (safe to call twice; a writer that got no frame leaves no file)."""
        if self._writer is not None:
            self._writer.release()
            self._writer = None


def read_frames(path: Path) -> Iterator[np.ndarray]:
    """The RGB frames of a video file, in order."""
    import cv2

    capture = cv2.VideoCapture(str(path))
    try:
        while True:
            ok, frame = capture.read()
            if not ok:
                return
            yield cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
    finally:
        capture.release()


class _Stream:
    """One stream's frames of the subtask under way: committed to a staging file, or still in the waiting window."""

    def __init__(self, staging: Path, fps: float, window_ns: int) -> None:
        self._staging, self._fps, self._window_ns = staging, fps, window_ns
        self._segments = 0
        self._writer: Mp4Writer | None = None
        self._waiting: list[tuple[int, int, np.ndarray]] = []  # (stamp, arrival, frame), in stamp order
        self._arrivals = 0
        self._closed_until_ns = -1  # the newest cut's stamp: a frame taken up to then arrived too late
        self.late_frames = 0

    def add(self, frame: np.ndarray, stamp_ns: int) -> None:
        if stamp_ns <= self._closed_until_ns:
            self.late_frames += 1
            return
        self._arrivals += 1
        bisect.insort(self._waiting, (stamp_ns, self._arrivals, frame), key=lambda item: item[:2])
        newest = self._waiting[-1][0]
        while self._waiting and self._waiting[0][0] < newest - self._window_ns:
            self._commit(self._waiting.pop(0)[2])

    def _commit(self, frame: np.ndarray) -> None:
        if self._writer is None:
            self._segments += 1
            self._writer = Mp4Writer(self._staging / f"{self._segments}.mp4", self._fps)
        self._writer.write(frame)

    def cut(self, stamp_ns: int) -> Mp4Writer | None:
        """End the subtask at `stamp_ns`: its frames (taken up to then) as a closed staging file, or None."""
        while self._waiting and self._waiting[0][0] <= stamp_ns:
            self._commit(self._waiting.pop(0)[2])
        self._closed_until_ns = max(self._closed_until_ns, stamp_ns)
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
        return writer

    def drop(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer, self._waiting = None, []


class VideoRecorder:
    """Cuts the image streams into subtask and run videos at StepRecord boundaries (not thread-safe).

    Feed it frames with `add_frame`, call `step_recorded` after each StepRecord is recorded and `run_finished` when
    the run ends; `close` discards frames that no step claimed. Frame and step times are nanoseconds on one clock
    (the publication times of the messages).
    """

    def __init__(self, config: VideoConfig | None = None) -> None:
        """Frames are staged in a private temporary folder until a step claims them."""
        self.config = config or VideoConfig()
        self._staging = Path(tempfile.mkdtemp(prefix="emmoe_videos_"))
        window_ns = int(self.config.window_s * 1e9)
        self._streams: dict[str, _Stream] = {}
        for stream in STREAMS:
            (self._staging / stream).mkdir()
            self._streams[stream] = _Stream(self._staging / stream, self.config.fps, window_ns)
        self._runs: dict[Path, list[int]] = {}

    def add_frame(self, stream: str, frame: np.ndarray, stamp_ns: int) -> None:
        """One frame of a stream (`head` or `third`), taken at `stamp_ns`.

        Raises:
            ValueError: unknown stream or a frame that is not an image.
            VideoError: the staging file cannot be written.
        """
        if stream not in self._streams:
            raise ValueError(f"unknown video stream {stream!r}; expected one of {', '.join(STREAMS)}")
        if frame.ndim not in (2, 3) or (frame.ndim == 3 and frame.shape[2] not in (3, 4)):
            raise ValueError(f"video frames must be RGB, RGBA or grey images, got shape {frame.shape}")
        self._streams[stream].add(frame, stamp_ns)

    def step_recorded(self, run_dir: Path, step: int, stamp_ns: int) -> list[Path]:
        """The frames taken up to `stamp_ns` since the previous step become step `step`'s subtask videos in
        `run_dir`; returns their paths. Step 1 starts the run over: video files of an earlier recording in `run_dir`
        are removed.
        """
        run_dir = Path(run_dir)
        if step == 1 or run_dir not in self._runs:
            for old in video_files(run_dir):
                old.unlink()
            self._runs[run_dir] = []
        written = []
        for stream, frames in self._streams.items():
            staged = frames.cut(stamp_ns)
            if staged is not None and staged.frames:
                target = run_dir / subtask_video_name(step, stream)
                run_dir.mkdir(parents=True, exist_ok=True)
                shutil.move(str(staged.path), target)
                written.append(target)
        self._runs[run_dir].append(step)
        return written

    def run_finished(self, run_dir: Path) -> list[Path]:
        """Write `run_{stream}.mp4` from the run's subtask videos, in step order; returns the paths written."""
        run_dir = Path(run_dir)
        steps = self._runs.pop(run_dir, [])
        written = []
        for stream in STREAMS:
            parts = [run_dir / subtask_video_name(step, stream) for step in steps]
            parts = [path for path in parts if path.is_file()]
            if not parts:
                continue
            writer = Mp4Writer(run_dir / run_video_name(stream), self.config.fps)
            try:
                for part in parts:
                    for frame in read_frames(part):
                        writer.write(frame)
            finally:
                writer.close()
            if writer.frames:
                written.append(writer.path)
        return written

    def after_record(self, run_dir: Path, step: int | None, stamp_ns: int,
                     finished_runs: Iterable[Path]) -> list[Path]:
        """What the evaluator calls after recording a StepRecord; returns the video files written.

        Args:
            run_dir: the record's run folder.
            step: the executed step, or None for a run-end marker (frames after the last step wait for the next run).
            stamp_ns: the record's publication time.
            finished_runs: folders of the runs that this record ended.
        """
        written = self.step_recorded(run_dir, step, stamp_ns) if step is not None else []
        for finished in finished_runs:
            written.extend(self.run_finished(finished))
        return written

    def late_frames(self) -> dict[str, int]:
        """Per stream, the frames dropped because they arrived after the step that closed their subtask."""
        return {stream: frames.late_frames for stream, frames in self._streams.items()}

    def close(self) -> None:
        """Drop frames no step claimed and the staging folder (safe to call twice)."""
        for frames in self._streams.values():
            frames.drop()
        shutil.rmtree(self._staging, ignore_errors=True)
