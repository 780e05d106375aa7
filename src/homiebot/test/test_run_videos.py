"""`homiebot run` records the videos by default; `--no-videos` turns them off."""

from __future__ import annotations

import argparse
from pathlib import Path

from homiebot.commands.run import add_arguments
from homiebot.run_config import RunnerConfig
from homiebot.runner import stack_overrides


def test_the_evaluator_records_videos_unless_told_not_to(tmp_path: Path) -> None:
    assert stack_overrides(RunnerConfig(tasks="test", out=tmp_path))["emmoe_evaluator"]["record_videos"] is True
    off = RunnerConfig(tasks="test", out=tmp_path, record_videos=False)
    assert stack_overrides(off)["emmoe_evaluator"]["record_videos"] is False


def test_the_no_videos_flag() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["--out", "x"]).no_videos is False
    assert parser.parse_args(["--out", "x", "--no-videos"]).no_videos is True
