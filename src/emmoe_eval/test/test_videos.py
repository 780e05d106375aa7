"""The video recorder core: playable MP4s per subtask and per run, cut at step boundaries."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from emmoe_eval.videos import (
    Mp4Writer,
    VideoConfig,
    VideoRecorder,
    read_frames,
    run_video_name,
    subtask_video_name,
    video_files,
)


def _frame(level: int, size: tuple[int, int] = (64, 48)) -> np.ndarray:
    width, height = size
    frame = np.zeros((height, width, 3), dtype=np.uint8)
    frame[..., 0] = level
    return frame


def _frame_count(path: Path) -> int:
    import cv2

    capture = cv2.VideoCapture(str(path))
    try:
        assert capture.isOpened(), f"{path} does not open"
        return int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    finally:
        capture.release()


def test_writer_makes_a_playable_mp4_with_every_frame(tmp_path: Path) -> None:
    writer = Mp4Writer(tmp_path / "clip.mp4", fps=5.0)
    for level in range(0, 250, 25):
        writer.write(_frame(level))
    writer.write(_frame(200, size=(32, 32)))  # another size is resized to the first frame's
    writer.close()
    frames = list(read_frames(tmp_path / "clip.mp4"))
    assert len(frames) == 11 == writer.frames == _frame_count(tmp_path / "clip.mp4")
    assert frames[0].shape == (48, 64, 3)
    # Lossy, but the red level of each frame survives closely.
    assert [round(float(frame[..., 0].mean()) / 25) for frame in frames[:10]] == list(range(10))


def test_a_writer_without_frames_leaves_no_file(tmp_path: Path) -> None:
    writer = Mp4Writer(tmp_path / "empty.mp4", fps=5.0)
    writer.close()
    assert not (tmp_path / "empty.mp4").exists()


class Clock:
    """Publication times in nanoseconds, 0.2 s apart (5 Hz)."""

    def __init__(self) -> None:
        self.now = 0

    def tick(self) -> int:
        self.now += 200_000_000
        return self.now


def test_frames_between_steps_become_subtask_and_run_videos(tmp_path: Path) -> None:
    run_dir = tmp_path / "91" / "1"
    clock = Clock()
    recorder = VideoRecorder(VideoConfig(fps=5.0))
    try:
        for _ in range(3):
            recorder.add_frame("head", _frame(10), clock.tick())
            recorder.add_frame("third", _frame(20), clock.tick())
        assert recorder.step_recorded(run_dir, 1, clock.tick()) == [run_dir / subtask_video_name(1, "head"),
                                                                     run_dir / subtask_video_name(1, "third")]
        for _ in range(4):
            recorder.add_frame("head", _frame(30), clock.tick())
        assert recorder.step_recorded(run_dir, 2, clock.tick()) == [run_dir / subtask_video_name(2, "head")]
        recorder.step_recorded(run_dir, 3, clock.tick())  # no frames: no files
        recorder.add_frame("third", _frame(40), clock.tick())
        recorder.step_recorded(run_dir, 4, clock.tick())
        written = recorder.run_finished(run_dir)
    finally:
        recorder.close()
    assert written == [run_dir / run_video_name("head"), run_dir / run_video_name("third")]
    counts = {path.name: _frame_count(path) for path in video_files(run_dir)}
    assert counts == {"run_head.mp4": 7, "run_third.mp4": 4, "subtask1_head.mp4": 3, "subtask1_third.mp4": 3,
                      "subtask2_head.mp4": 4, "subtask4_third.mp4": 1}
    assert list(counts) == ["run_head.mp4", "run_third.mp4", "subtask1_head.mp4", "subtask1_third.mp4",
                            "subtask2_head.mp4", "subtask4_third.mp4"]


def test_frames_go_by_their_time_not_by_their_arrival(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    recorder = VideoRecorder(VideoConfig(window_s=1.0))
    second = 1_000_000_000
    try:
        # Frames at 1.0 s and 1.4 s, then one at 2.0 s that arrives before the step published at 1.8 s; the frame at
        # 1.6 s arrives out of order too. Step 1 ends at 1.8 s: frames 1.0, 1.4, 1.6; step 2 gets the 2.0 s frame.
        for stamp in (1.0, 1.4, 2.0, 1.6):
            recorder.add_frame("head", _frame(int(stamp * 100)), int(stamp * second))
        recorder.step_recorded(run_dir, 1, int(1.8 * second))
        recorder.step_recorded(run_dir, 2, int(2.5 * second))
    finally:
        recorder.close()
    first = [round(float(frame[..., 0].mean())) for frame in read_frames(run_dir / "subtask1_head.mp4")]
    assert len(first) == 3 and first == sorted(first)  # in time order: 1.0, 1.4, 1.6 s
    assert _frame_count(run_dir / "subtask2_head.mp4") == 1


def test_a_frame_arriving_after_its_subtasks_step_is_dropped_not_filed_into_the_next(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    recorder = VideoRecorder(VideoConfig(window_s=1.0))
    second = 1_000_000_000
    try:
        recorder.add_frame("head", _frame(100), 1 * second)
        recorder.step_recorded(run_dir, 1, 2 * second)
        recorder.add_frame("head", _frame(150), int(1.5 * second))  # taken during step 1, received after it
        recorder.add_frame("head", _frame(200), 2 * second)  # taken at the step's own time: step 1's too
        recorder.add_frame("head", _frame(250), int(2.5 * second))
        recorder.step_recorded(run_dir, 2, 3 * second)
        late = recorder.late_frames()
    finally:
        recorder.close()
    assert _frame_count(run_dir / "subtask1_head.mp4") == 1
    second_subtask = [round(float(frame[..., 0].mean())) for frame in read_frames(run_dir / "subtask2_head.mp4")]
    assert len(second_subtask) == 1 and abs(second_subtask[0] - 250) <= 3
    assert late == {"head": 2, "third": 0}


def test_a_long_subtask_keeps_only_the_waiting_window_in_memory(tmp_path: Path) -> None:
    recorder = VideoRecorder(VideoConfig(window_s=1.0))
    try:
        for index in range(30):  # 6 s at 5 Hz
            recorder.add_frame("third", _frame(index), index * 200_000_000)
        waiting = recorder._streams["third"]._waiting
        assert len(waiting) == 6  # the frames within 1 s of the newest one
        recorder.step_recorded(tmp_path, 1, 30 * 200_000_000)
    finally:
        recorder.close()
    assert _frame_count(tmp_path / "subtask1_third.mp4") == 30


def test_a_rerecorded_run_replaces_its_old_videos(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    clock = Clock()
    recorder = VideoRecorder()
    try:
        recorder.add_frame("head", _frame(1), clock.tick())
        recorder.step_recorded(run_dir, 1, clock.tick())
        recorder.add_frame("head", _frame(1), clock.tick())
        recorder.step_recorded(run_dir, 2, clock.tick())
        recorder.run_finished(run_dir)
        recorder.add_frame("third", _frame(2), clock.tick())
        recorder.step_recorded(run_dir, 1, clock.tick())
        recorder.run_finished(run_dir)
    finally:
        recorder.close()
    assert [path.name for path in video_files(run_dir)] == ["run_third.mp4", "subtask1_third.mp4"]


def test_bad_input_is_refused_with_a_reason(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fps"):
        VideoConfig(fps=0.0)
    recorder = VideoRecorder()
    try:
        with pytest.raises(ValueError, match="stream"):
            recorder.add_frame("side", _frame(1), 0)
        with pytest.raises(ValueError, match="RGB"):
            recorder.add_frame("head", np.zeros((8, 8, 2), dtype=np.uint8), 0)
    finally:
        recorder.close()


def test_the_report_links_a_runs_videos(handmade, tmp_path: Path, capsys) -> None:
    import shutil
    from urllib.parse import unquote

    from emmoe_eval.cli import main

    runs = tmp_path / "exp_with_videos"
    shutil.copytree(handmade.runs_dir, runs)
    recorder = VideoRecorder()
    try:
        recorder.add_frame("third", _frame(5), 1)
        recorder.step_recorded(runs / "3" / "1", 1, 2)
        recorder.run_finished(runs / "3" / "1")
    finally:
        recorder.close()
    out = tmp_path / "report"
    assert main(["report", str(runs), "--data", str(handmade.data_dir), "--out", str(out)]) == 0
    capsys.readouterr()
    page = (out / "index.html").read_text(encoding="utf-8")
    links = [unquote(link) for link in page.split("href='")[1:]]
    videos = [link.split("'", 1)[0] for link in links if ".mp4'" in link]
    assert [Path(video).name for video in videos] == ["run_third.mp4", "subtask1_third.mp4"]
    assert all((out / video).is_file() for video in videos)
