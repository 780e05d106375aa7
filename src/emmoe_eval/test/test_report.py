"""`emmoe-eval report`: a self-contained HTML page and a Markdown summary for several experiments."""

from __future__ import annotations

import base64
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import numpy as np
from PIL import Image

from emmoe_eval.cli import main


class LinkCollector(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "img":
            self.sources.append(values["src"] or "")
        if tag == "a":
            self.links.append(values["href"] or "")


def test_report_for_two_experiments(handmade, tmp_path, capsys):
    for index, view in enumerate(("front", "left", "back", "right")):
        Image.fromarray(np.full((4, 4, 3), 50 * index, dtype=np.uint8)).save(
            handmade.runs_dir / "3" / "1" / f"subtask2_{view}.png")
    second = tmp_path / "exp_b"
    shutil.copytree(handmade.runs_dir, second)
    shutil.rmtree(second / "3" / "2")                     # exp_b lacks one run
    out = tmp_path / "report"
    assert main(["report", str(handmade.runs_dir), str(second), "--data", str(handmade.data_dir), "--out", str(out),
                 "--title", "Hand-made check"]) == 0
    printed = capsys.readouterr()
    assert printed.out.split() == [str(out / "index.html"), str(out / "summary.md")]
    assert "exp: " in printed.err and "truncated or corrupt line" in printed.err

    page = (out / "index.html").read_text(encoding="utf-8")
    parser = LinkCollector()
    parser.feed(page)
    # Self-contained: the three plots are embedded PNGs, nothing else is loaded.
    assert len(parser.sources) == 3 and all(source.startswith("data:image/png;base64,") for source in parser.sources)
    for source in parser.sources:
        assert base64.b64decode(source.split(",", 1)[1]).startswith(b"\x89PNG")
    # Links to run folders and step images resolve from the report folder.
    targets = [out / unquote(link) for link in parser.links]
    assert targets and all(target.exists() for target in targets)
    assert any(target.name == "subtask2_front.png" for target in targets)
    assert "<h1>Hand-made check</h1>" in page and "exp_b" in page
    assert "33.33" in page                                  # exp's SR in percent
    assert "find a cold apple and put it on the kitchen_counter" in page

    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert summary.startswith("# Hand-made check")
    assert "| exp | 6 | 2 | 33.33 | 31.25 | 55.56 | 14.29 | 50.00 | 33.33-33.33 | 50.00-61.11 |" in summary
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", summary):
        assert (out / image).is_file()
    scores = json.loads((out / "scores.json").read_text())
    assert set(scores) == {"exp", "exp_b"} and scores["exp_b"]["runs"] == 5


def test_report_needs_existing_experiments(handmade, tmp_path, capsys):
    assert main(["report", str(tmp_path / "none"), "--data", str(handmade.data_dir), "--out",
                 str(tmp_path / "r")]) == 2
    assert "no such experiment folder" in capsys.readouterr().err
    assert not Path(tmp_path / "r").exists()
