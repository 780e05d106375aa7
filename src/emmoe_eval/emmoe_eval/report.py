"""Reports of one or more scored experiments: a self-contained HTML page and a Markdown summary with plots.

`OUT/index.html` embeds its plots as base64 data URIs and links each run's folder and step images by relative path;
`OUT/summary.md` references the same plots written as PNG files next to it; `OUT/scores.json` holds every
experiment's score summary. With two or more experiments both pages compare each with the first, as
`emmoe-eval compare` does (on their common tasks; the bootstrap's resamples and seed are those of the scores).
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from emmoe_eval.compare import (INDEPENDENCE_NOTE, CompareError, Comparison, Conditions, Side, compare_sides,
                                format_interval, read_conditions)
from emmoe_core.protocol import VIEWS
from emmoe_eval.dataset import Task, subtask_images, task_sort_key
from emmoe_eval.experiments import Experiment
from emmoe_eval.metrics import EXECUTED_ACTIONS, HEADLINE, UNCLASSIFIED, Evaluation, ScoringConfig
from emmoe_core.protocol import ERROR_CATEGORY, ERROR_TYPES
from emmoe_eval.videos import video_files

_METRIC_NAMES = {"SR": "success rate", "PLWSR": "path-length weighted SR", "TP": "task progress",
                 "SRR": "success re-plan rate", "SER": "success end rate"}
_COLORS = ("#3b6ea8", "#e08a2c", "#4e9a57", "#c44e52", "#8172b2", "#937860", "#da8bc3", "#8c8c8c")
_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:0;color:#1d2330;background:#f5f6f8}
main{max-width:1180px;margin:0 auto;padding:24px 28px 60px}
h1{font-size:26px;margin:8px 0 2px}h2{font-size:19px;margin:34px 0 10px;border-bottom:2px solid #dde1e7;padding-bottom:4px}
h3{font-size:16px;margin:18px 0 8px}.sub{color:#5b6476;margin:0 0 18px;font-size:14px}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:10px 0}
.card{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:10px 16px;min-width:150px}
.card .name{font-size:12px;color:#5b6476;text-transform:uppercase;letter-spacing:.04em}
.card .value{font-size:24px;font-weight:600}.card .ci{font-size:12px;color:#5b6476}
table{border-collapse:collapse;background:#fff;font-size:13px;margin:6px 0 14px}
th,td{border:1px solid #dde1e7;padding:5px 9px;text-align:right;vertical-align:top}
th{background:#eef1f5;font-weight:600}td.l,th.l{text-align:left}tr:nth-child(even) td{background:#fafbfc}
img.plot{max-width:100%;background:#fff;border:1px solid #dde1e7;border-radius:6px;margin:6px 0}
.ok{color:#2f7d3a;font-weight:600}.fail{color:#b23b3b;font-weight:600}.muted{color:#7a8396}
details{background:#fff;border:1px solid #dde1e7;border-radius:8px;padding:8px 14px;margin:10px 0}
summary{cursor:pointer;font-weight:600}a{color:#285e9e;text-decoration:none}a:hover{text-decoration:underline}
.run{white-space:nowrap}.steps a{margin-right:3px}.warn{color:#8a5a00;font-size:13px}
"""


@dataclass
class ExperimentResult:
    """An experiment's runs and their evaluation."""

    experiment: Experiment
    evaluation: Evaluation

    @property
    def name(self) -> str:
        """The experiment's name (its folder name)."""
        return self.experiment.name

    @property
    def conditions(self) -> Conditions:
        """The setting and conditions recorded in the experiment folder's setting.json."""
        return read_conditions(self.experiment.directory)

    @property
    def side(self) -> Side:
        """The experiment as one side of a comparison."""
        return Side(self.name, tuple(self.evaluation.outcomes), self.conditions)


def compare_with_first(results: Sequence[ExperimentResult]) -> list[tuple[ExperimentResult, Comparison | str]]:
    """Each experiment after the first compared with the first (as `emmoe-eval compare`), or why it cannot be."""
    summary = results[0].evaluation.summary
    intervals = summary["confidence_intervals"]
    config = ScoringConfig(compat=summary["compat"], bootstrap_resamples=intervals["resamples"], seed=intervals["seed"],
                           srr_run=summary["srr_run"])
    comparisons: list[tuple[ExperimentResult, Comparison | str]] = []
    for result in results[1:]:
        try:
            comparisons.append((result, compare_sides(results[0].side, result.side, config)))
        except CompareError as error:
            comparisons.append((result, str(error)))
    return comparisons


# ---- plots -------------------------------------------------------------------------------------------------------------

def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return buffer.getvalue()


def _percent_or_zero(value: float | None) -> float:
    return 0.0 if value is None else 100.0 * value


def plot_metrics(results: Sequence[ExperimentResult]) -> bytes:
    """Grouped bars of SR, PLWSR, TP, SRR and SER (percent) per experiment, with bootstrap CIs on SR and TP."""
    figure = Figure(figsize=(9.5, 3.8))
    axes = figure.subplots()
    width = 0.8 / max(len(results), 1)
    positions = np.arange(len(HEADLINE))
    for number, result in enumerate(results):
        summary = result.evaluation.summary
        values = [_percent_or_zero(summary[name]) for name in HEADLINE]
        offsets = positions - 0.4 + width * (number + 0.5)
        axes.bar(offsets, values, width * 0.92, label=result.name, color=_COLORS[number % len(_COLORS)])
        intervals = summary["confidence_intervals"]
        for index, name in enumerate(HEADLINE):
            top = values[index]
            if name in ("SR", "TP") and intervals[name] is not None:
                low, high = (100 * bound for bound in intervals[name])
                axes.errorbar(offsets[index], values[index], yerr=[[values[index] - low], [high - values[index]]],
                              color="#222", capsize=3, linewidth=1)
                top = max(top, high)
            label = "-" if summary[name] is None else f"{values[index]:.1f}"
            axes.text(offsets[index], top + 1.5, label, ha="center", va="bottom", fontsize=7)
    axes.set_xticks(positions, [f"{name}\n{_METRIC_NAMES[name]}" for name in HEADLINE], fontsize=8)
    axes.set_ylabel("percent")
    axes.set_ylim(0, 110)
    axes.set_title("EMMOE metrics (bars on SR and TP: 95% bootstrap CI over tasks)", fontsize=10)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize=8, loc="upper right")
    return _png(figure)


def _error_kinds(results: Sequence[ExperimentResult]) -> list[str]:
    kinds = list(ERROR_TYPES)
    if any(any(result.evaluation.summary["errors"]["by_type"][UNCLASSIFIED].values()) for result in results):
        kinds.append(UNCLASSIFIED)
    return kinds


def _observed_error_kinds(results: Sequence[ExperimentResult]) -> list[str]:
    """Error types with at least one failed step in some experiment (table rows)."""
    return [kind for kind in _error_kinds(results)
            if any(any(result.evaluation.summary["errors"]["by_type"][kind].values()) for result in results)]


def plot_errors(results: Sequence[ExperimentResult]) -> bytes:
    """Figure 3: failed steps per error type, in successful and in failed runs, one panel per experiment."""
    kinds = _error_kinds(results)
    figure = Figure(figsize=(9.5, 2.9 * len(results) + 0.4))
    panels = np.atleast_1d(figure.subplots(len(results), 1, squeeze=False)[:, 0])
    positions = np.arange(len(kinds))
    shades = {"format": "#f3efe0", "logical": "#e6eef7", "distance": "#eaf4e8", "execution": "#f7e8e8"}
    for axes, result in zip(panels, results):
        by_type = result.evaluation.summary["errors"]["by_type"]
        for index, kind in enumerate(kinds):
            if kind in ERROR_CATEGORY:
                axes.axvspan(index - 0.5, index + 0.5, color=shades[ERROR_CATEGORY[kind]], zorder=0)
        for offset, bucket, color, label in ((-0.2, "successful_runs", "#4e9a57", "in successful runs"),
                                             (0.2, "failed_runs", "#c44e52", "in failed runs")):
            counts = [by_type[kind][bucket] for kind in kinds]
            bars = axes.bar(positions + offset, counts, 0.38, color=color, label=label, zorder=2)
            axes.bar_label(bars, labels=[str(count) if count else "" for count in counts], fontsize=7, padding=1)
        axes.set_xticks(positions, [kind if kind != UNCLASSIFIED else "other" for kind in kinds], fontsize=8)
        axes.set_ylabel("failed steps")
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        axes.set_title(f"{result.name}: errors by type", fontsize=10)
        axes.set_xlim(-0.5, len(kinds) - 0.5)
        axes.margins(y=0.25)
        for category in shades:
            members = [index for index, kind in enumerate(kinds) if ERROR_CATEGORY.get(kind) == category]
            axes.text((members[0] + members[-1]) / 2, 0.97, category, transform=axes.get_xaxis_transform(),
                      ha="center", va="top", fontsize=8, color="#5b6476")
        axes.legend(fontsize=8, loc="upper right", bbox_to_anchor=(1.0, 0.88))
    figure.tight_layout()
    return _png(figure)


def plot_actions(results: Sequence[ExperimentResult]) -> bytes:
    """Table 4 as bars: success rate of each action's executions, and its share of execution errors (E1-E3)."""
    figure = Figure(figsize=(9.5, 3.4))
    left, right = figure.subplots(1, 2)
    width = 0.8 / max(len(results), 1)
    positions = np.arange(len(EXECUTED_ACTIONS))
    for number, result in enumerate(results):
        table = result.evaluation.summary["per_action"]
        offsets = positions - 0.4 + width * (number + 0.5)
        color = _COLORS[number % len(_COLORS)]
        left.bar(offsets, [_percent_or_zero(table[action]["SR"]) for action in EXECUTED_ACTIONS], width * 0.92,
                 color=color, label=result.name)
        right.bar(offsets, [_percent_or_zero(table[action]["P"]) for action in EXECUTED_ACTIONS], width * 0.92,
                  color=color, label=result.name)
    for axes, title in ((left, "success rate of executions"), (right, "share of execution errors (E1-E3)")):
        axes.set_xticks(positions, EXECUTED_ACTIONS, fontsize=8)
        axes.set_ylim(0, 105)
        axes.set_ylabel("percent")
        axes.set_title(title, fontsize=10)
        axes.grid(axis="y", alpha=0.3)
    handles, labels = left.get_legend_handles_labels()
    figure.legend(handles, labels, fontsize=8, loc="lower center", ncol=min(len(results), 4),
                  bbox_to_anchor=(0.5, -0.06))
    figure.tight_layout()
    return _png(figure)


# ---- shared formatting ---------------------------------------------------------------------------------------------------

def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _interval(summary: Mapping[str, object], name: str) -> str:
    intervals = summary["confidence_intervals"]
    bounds = intervals[name]  # type: ignore[index]
    return "-" if bounds is None else f"{_pct(bounds[0])}-{_pct(bounds[1])}"


_COMPARISON_HEADER = ("metric", "{first}", "{second}", "{second} - {first}", "95% CI of the difference")
_COMPARISON_NOTE = ("Each experiment against the first, on the tasks both have scored runs of. CIs: paired percentile "
                    "bootstrap over those tasks (the same tasks resampled for both). The sign-flip test is over tasks, "
                    "on the per-task success rate. " + INDEPENDENCE_NOTE)


def _comparison_rows(comparison: Comparison) -> list[list[str]]:
    rows = []
    for name in HEADLINE:
        difference = comparison.differences[name]
        rows.append([name, _pct(comparison.metrics[0][name]), _pct(comparison.metrics[1][name]),
                     "-" if difference is None else f"{100 * difference:+.2f}",
                     format_interval(comparison.intervals[name])])
    return rows


def _comparison_lines(comparison: Comparison) -> list[str]:
    """The verdict, the tests' details and any conditions warning, one sentence each."""
    return [comparison.verdict(),
            f"{comparison.runs[0]} and {comparison.runs[1]} runs on {len(comparison.task_ids)} common task(s) "
            f"({', '.join(comparison.task_ids)}); successes {comparison.successes[0]}/{comparison.runs[0]} and "
            f"{comparison.successes[1]}/{comparison.runs[1]}; sign-flip test {comparison.sign_flip.method} "
            f"({comparison.sign_flip.nonzero_tasks} task(s) differ); bootstrap {comparison.resamples} resamples, "
            f"seed {comparison.seed}.",
            *(f"Warning: {warning}" for warning in comparison.warnings())]


_TABLE4_NOTE = ("SR: successes / executions (pooled); SR*: the paper's retry-adjusted s/(3f+2s) (a failed execution "
                "counts 3 attempts); range: min-max of SR over run indices (the release's analysis notebook); P: share "
                "of execution errors.")
_TABLE4_CELL = "SR (executions) / SR* / range / P"


def _action_cell(row: Mapping[str, Any]) -> str:
    bounds = row["SR_range"]
    span = "-" if bounds is None else f"{_pct(bounds[0])}-{_pct(bounds[1])}"
    return f"{_pct(row['SR'])} ({row['executions']}) / {_pct(row['SR_paper'])} / {span} / {_pct(row['P'])}"


def _failures(summary: Mapping[str, Any]) -> str:
    return (f"infrastructure failures: {summary.get('infrastructure_failures', 0)} (not planner results, left out "
            "of every metric)")


def _link(target: Path, out_dir: Path) -> str:
    return quote(os.path.relpath(target.resolve(), out_dir.resolve()).replace(os.sep, "/"))


# ---- HTML --------------------------------------------------------------------------------------------------------------

def _esc(value: object) -> str:
    return html.escape(str(value))


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], left: frozenset[int] = frozenset({0})) -> str:
    """An HTML table; cells are already escaped HTML; columns in `left` are left-aligned."""
    head = "".join(f"<th class='l'>{cell}</th>" if index in left else f"<th>{cell}</th>"
                   for index, cell in enumerate(header))
    body = "".join("<tr>" + "".join(f"<td class='l'>{cell}</td>" if index in left else f"<td>{cell}</td>"
                                    for index, cell in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _run_cell(result: ExperimentResult, run_json: Mapping[str, object], out_dir: Path) -> str:
    run_dir = result.experiment.directory / str(run_json["task_id"]) / str(run_json["run"])
    mark = "<span class='ok'>&#10003;</span>" if run_json["success"] else "<span class='fail'>&#10007;</span>"
    progress = float(run_json["TP"])  # type: ignore[arg-type]
    parts = [f"<span class='run'>{mark} <a href='{_link(run_dir, out_dir)}'>run {_esc(run_json['run'])}</a> "
             f"TP {100 * progress:.0f}% &middot; {run_json['steps']} steps</span>"]
    if run_json.get("corrupt"):
        parts.append("<span class='warn'>corrupt file</span>")
    images = subtask_images(run_dir) if run_dir.is_dir() else {}
    if images:
        links = " ".join(
            f"<a href='{_link(views[VIEWS[0]] if VIEWS[0] in views else next(iter(views.values())), out_dir)}' "
            f"title='{_esc(', '.join(path.name for path in views.values()))}'>{index}</a>"
            for index, views in images.items())
        parts.append(f"<span class='steps muted'>images after step: {links}</span>")
    videos = video_files(run_dir) if run_dir.is_dir() else []
    if videos:
        links = " ".join(f"<a href='{_link(path, out_dir)}'>{_esc(path.stem)}</a>" for path in videos)
        parts.append(f"<span class='steps muted'>videos: {links}</span>")
    return "<br>".join(parts)


def render_html(results: Sequence[ExperimentResult], tasks: Mapping[str, Task], out_dir: Path, title: str,
                plots: Mapping[str, bytes], comparisons: Sequence[tuple[ExperimentResult, Comparison | str]]) -> str:
    """The report page (plots embedded as data URIs; `comparisons` from `compare_with_first`)."""
    def image(name: str, alt: str) -> str:
        encoded = base64.b64encode(plots[name]).decode("ascii")
        return f"<img class='plot' alt='{_esc(alt)}' src='data:image/png;base64,{encoded}'>"

    sections = [f"<h1>{_esc(title)}</h1>",
                f"<p class='sub'>{len(results)} experiment(s) &middot; split "
                f"{_esc(results[0].evaluation.summary.get('split', 'all'))} &middot; compat "
                f"{_esc(results[0].evaluation.summary['compat'])} &middot; metrics in percent</p>"]
    for number, result in enumerate(results):
        summary = result.evaluation.summary
        cards = "".join(
            f"<div class='card'><div class='name'>{name} &middot; {_METRIC_NAMES[name]}</div>"
            f"<div class='value' style='color:{_COLORS[number % len(_COLORS)]}'>{_pct(summary[name])}</div>"
            + (f"<div class='ci'>95% CI {_interval(summary, name)}</div>" if name in ("SR", "TP") else "")
            + "</div>" for name in HEADLINE)
        sections.append(f"<h3>{_esc(result.name)} <span class='muted'>&middot; {_esc(result.conditions.describe())} "
                        f"&middot; {summary['runs']} runs of {summary['tasks']} tasks &middot; {_failures(summary)}"
                        "</span></h3>"
                        f"<div class='cards'>{cards}</div>")
    sections += ["<h2>Metrics</h2>", image("metrics", "metric bars per experiment"),
                 _table(["experiment", "runs", "tasks", *HEADLINE, "SR 95% CI", "TP 95% CI", "setting", "conditions"],
                        [[_esc(result.name), str(result.evaluation.summary["runs"]),
                          str(result.evaluation.summary["tasks"]),
                          *(_pct(result.evaluation.summary[name]) for name in HEADLINE),
                          _interval(result.evaluation.summary, "SR"), _interval(result.evaluation.summary, "TP"),
                          _esc(result.conditions.setting), _esc(result.conditions.conditions)]
                         for result in results], frozenset({0, 10, 11}))]
    if comparisons:
        sections += ["<h2>Comparison</h2>", f"<p class='sub'>{_esc(_COMPARISON_NOTE)}</p>"]
        for result, comparison in comparisons:
            title = f"{_esc(result.name)} against {_esc(results[0].name)}"
            if isinstance(comparison, str):
                sections.append(f"<h3>{title}</h3><p class='warn'>{_esc(comparison)}</p>")
                continue
            header = [_esc(cell.format(first=results[0].name, second=result.name)) for cell in _COMPARISON_HEADER]
            lines = _comparison_lines(comparison)
            sections += [f"<h3>{title}</h3>", _table(header, _comparison_rows(comparison)),
                         f"<p><b>{_esc(lines[0])}</b></p>",
                         *(f"<p class='{'warn' if line.startswith('Warning') else 'sub'}'>{_esc(line)}</p>"
                           for line in lines[1:])]
    attributes = list(results[0].evaluation.summary["per_attribute"])
    sections += ["<h2>Per task attribute (Table 5)</h2>",
                 "<p class='sub'>Attribute lists as hard-coded in the released notebooks; their task numbering may "
                 "differ from the paper's appendix order.</p>",
                 _table(["attribute", *(f"{_esc(result.name)} SR / TP (runs)" for result in results)],
                        [[_esc(name), *(f"{_pct(row['SR'])} / {_pct(row['TP'])} ({row['runs']})"
                                        for row in (result.evaluation.summary["per_attribute"][name]
                                                    for result in results))] for name in attributes])]
    sections += ["<h2>Low-level actions (Table 4)</h2>", image("actions", "per-action success"),
                 f"<p class='sub'>{_esc(_TABLE4_NOTE)}</p>",
                 _table(["action", *(f"{_esc(result.name)} {_TABLE4_CELL}" for result in results)],
                        [[_esc(action), *(_esc(_action_cell(row))
                                          for row in (result.evaluation.summary["per_action"][action]
                                                      for result in results))] for action in EXECUTED_ACTIONS])]
    kinds = _observed_error_kinds(results)
    sections += ["<h2>Errors by type (Figure 3)</h2>", image("errors", "errors by type"),
                 "<p class='sub'>Failed steps by EMMOE error type, in runs that succeeded and in runs that failed; "
                 "types that never occurred are left out of the table.</p>",
                 _table(["type", "category", *(f"{_esc(result.name)} successful / failed runs" for result in results)],
                        [[_esc(kind), _esc(ERROR_CATEGORY.get(kind, "-")),
                          *(f"{row['successful_runs']} / {row['failed_runs']}"
                            for row in (result.evaluation.summary["errors"]["by_type"][kind] for result in results))]
                         for kind in kinds])]
    sections.append("<h2>Per task</h2>")
    for result in results:
        per_task = result.evaluation.summary["per_task"]
        rows = []
        for task_id in sorted(per_task, key=task_sort_key):
            row = per_task[task_id]
            task = tasks.get(task_id)
            rows.append([_esc(task_id), _esc(task.split if task else "?"),
                         _esc(task.instruction if task else ""), str(task.expert_length if task else "-"),
                         _pct(row["SR"]), _pct(row["TP"]),
                         "<br>".join(_run_cell(result, run, out_dir) for run in row["run_results"])])
        table = _table(["task", "split", "instruction", "L*", "SR", "TP", "runs"], rows, frozenset({0, 1, 2, 6}))
        problems = result.experiment.problems + result.evaluation.problems
        notes = "".join(f"<div class='warn'>{_esc(problem)}</div>" for problem in problems[:30])
        if len(problems) > 30:
            notes += f"<div class='warn'>... and {len(problems) - 30} more warnings</div>"
        sections.append(f"<details open><summary>{_esc(result.name)}: {len(per_task)} tasks</summary>"
                        f"{table}{notes}</details>")
    body = "\n".join(sections)
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_esc(title)}</title>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><style>{_CSS}</style></head>"
            f"<body><main>{body}</main></body></html>\n")


# ---- Markdown ----------------------------------------------------------------------------------------------------------

def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def clean(cell: str) -> str:
        return cell.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(clean(cell) for cell in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(clean(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(results: Sequence[ExperimentResult], title: str, plot_files: Mapping[str, str],
                    comparisons: Sequence[tuple[ExperimentResult, Comparison | str]]) -> str:
    """The Markdown summary (plots referenced as PNG files next to it; `comparisons` from `compare_with_first`)."""
    first = results[0].evaluation.summary
    parts = [f"# {title}", "",
             f"Split {first.get('split', 'all')}, compat {first['compat']}; metrics in percent.", "",
             *(f"- {result.name}: {_failures(result.evaluation.summary)}" for result in results), "",
             _md_table(["experiment", "runs", "tasks", *HEADLINE, "SR 95% CI", "TP 95% CI", "setting", "conditions"],
                       [[result.name, str(result.evaluation.summary["runs"]), str(result.evaluation.summary["tasks"]),
                         *(_pct(result.evaluation.summary[name]) for name in HEADLINE),
                         _interval(result.evaluation.summary, "SR"), _interval(result.evaluation.summary, "TP"),
                         result.conditions.setting, result.conditions.conditions]
                        for result in results]),
             "", f"![metrics]({plot_files['metrics']})", ""]
    if comparisons:
        parts += ["## Comparison", "", _COMPARISON_NOTE, ""]
        for result, comparison in comparisons:
            parts += [f"### {result.name} against {results[0].name}", ""]
            if isinstance(comparison, str):
                parts += [comparison, ""]
                continue
            header = [cell.format(first=results[0].name, second=result.name) for cell in _COMPARISON_HEADER]
            lines = _comparison_lines(comparison)
            parts += [_md_table(header, _comparison_rows(comparison)), "", f"**{lines[0]}**", "",
                      *(line for text in lines[1:] for line in (text, ""))]
    parts += ["## Per task attribute (Table 5)", "",
              _md_table(["attribute", *(f"{result.name} SR / TP (runs)" for result in results)],
                        [[name, *(f"{_pct(row['SR'])} / {_pct(row['TP'])} ({row['runs']})"
                                  for row in (result.evaluation.summary["per_attribute"][name] for result in results))]
                         for name in first["per_attribute"]]),
              "", "## Low-level actions (Table 4)", "", _TABLE4_NOTE, "",
              _md_table(["action", *(f"{result.name} {_TABLE4_CELL}" for result in results)],
                        [[action, *(_action_cell(row)
                                    for row in (result.evaluation.summary["per_action"][action] for result in results))]
                         for action in EXECUTED_ACTIONS]),
              "", f"![actions]({plot_files['actions']})", "", "## Errors by type (Figure 3)", "",
              _md_table(["type", *(f"{result.name} successful / failed runs" for result in results)],
                        [[kind, *(f"{row['successful_runs']} / {row['failed_runs']}"
                                  for row in (result.evaluation.summary["errors"]["by_type"][kind]
                                              for result in results))]
                         for kind in _observed_error_kinds(results)]),
              "", f"![errors]({plot_files['errors']})", "", "## Per task", ""]
    task_ids = sorted({task_id for result in results for task_id in result.evaluation.summary["per_task"]},
                      key=task_sort_key)
    parts.append(_md_table(["task", *(f"{result.name} SR / TP" for result in results)],
                           [[task_id, *(f"{_pct(row['SR'])} / {_pct(row['TP'])}" if row else "-"
                                        for row in (result.evaluation.summary["per_task"].get(task_id)
                                                    for result in results))] for task_id in task_ids]))
    return "\n".join(parts) + "\n"


def write_report(results: Sequence[ExperimentResult], tasks: Mapping[str, Task], out_dir: Path | str,
                 title: str = "EMMOE evaluation report") -> list[Path]:
    """Write index.html, summary.md, the plot PNGs and scores.json into `out_dir`.

    Returns:
        The paths of index.html and summary.md.

    Raises:
        ValueError: when `results` is empty.
    """
    if not results:
        raise ValueError("a report needs at least one experiment")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = {"metrics": plot_metrics(results), "errors": plot_errors(results), "actions": plot_actions(results)}
    plot_files = {}
    for name, data in plots.items():
        (out_dir / f"{name}.png").write_bytes(data)
        plot_files[name] = f"{name}.png"
    comparisons = compare_with_first(results)
    index = out_dir / "index.html"
    index.write_text(render_html(results, tasks, out_dir, title, plots, comparisons), encoding="utf-8")
    summary = out_dir / "summary.md"
    summary.write_text(render_markdown(results, title, plot_files, comparisons), encoding="utf-8")
    (out_dir / "scores.json").write_text(json.dumps({result.name: result.evaluation.summary for result in results},
                                                    indent=2) + "\n", encoding="utf-8")
    return [index, summary]
