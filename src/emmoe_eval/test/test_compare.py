"""`emmoe-eval compare` and the comparison core: exact tests against hand-computed values, the paired bootstrap,
two small experiment folders compared through the CLI, and the report's comparison section."""

from __future__ import annotations

import json
import math
import shutil
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from emmoe_eval.cli import main
from emmoe_eval.compare import (CompareError, Side, binomial_test, compare_sides, fisher_exact, paired_bootstrap,
                                parse_reference, read_conditions, sign_flip_test, task_counts)
from emmoe_eval.dataset import load_tasks
from emmoe_eval.experiments import load_experiment
from emmoe_eval.metrics import HEADLINE, RunOutcome, ScoringConfig, evaluate


def outcome(task_id: str, run_id: str, success: bool, replans: int = 0, ended: bool = True) -> RunOutcome:
    """A scored run of 5 steps (L* 5) with TP 1 when successful, else 1/2."""
    return RunOutcome(task_id, run_id, (), 1.0 if success else 0.5, success, success and ended, ended, 5, 5, replans,
                      ())


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def always_successful(source: Path, target: Path) -> Path:
    """A copy of the hand-made experiment whose runs of each task are all copies of its successful run 1."""
    shutil.copytree(source, target)
    for task_id in ("3", "91"):
        for run_id in ("2", "3"):
            shutil.copy(source / task_id / "1" / "trajectory.jsonl", target / task_id / run_id / "trajectory.jsonl")
    return target


# ---- exact tests ---------------------------------------------------------------------------------------------------

def test_fisher_exact_against_hand_computed_values():
    # 11/30 against 6/30: 17 successes in 60 runs, 30 per row; the hypergeometric law of A's successes X is
    # C(17, x) C(43, 30 - x) / C(60, 30), symmetric about 8.5 (P(x) = P(17 - x)), so the two-sided p is
    # 2 P(X >= 11) = 4917392 / 19546877 = 0.2516.
    by_hand = Fraction(2 * sum(math.comb(17, x) * math.comb(43, 30 - x) for x in range(11, 18)), math.comb(60, 30))
    assert by_hand == Fraction(4917392, 19546877)
    assert fisher_exact(11, 30, 6, 30) == pytest.approx(0.2515691892878847, abs=1e-15)
    assert fisher_exact(6, 30, 11, 30) == fisher_exact(11, 30, 6, 30)
    # 3/3 against 0/3: weights C(3, x) C(3, 3 - x) = 1, 9, 9, 1 of 20; the two extreme tables: 2/20.
    assert fisher_exact(3, 3, 0, 3) == pytest.approx(0.1, abs=1e-15)
    # 2/6 against 6/6: weights C(8, x) C(4, 6 - x) for x = 2..6 are 28, 224, 420, 224, 28 of 924: 56/924.
    assert fisher_exact(2, 6, 6, 6) == pytest.approx(56 / 924, abs=1e-15)
    assert fisher_exact(2, 6, 2, 6) == 1.0
    with pytest.raises(ValueError):
        fisher_exact(4, 3, 0, 3)


def test_binomial_test_against_hand_computed_values():
    # 2 successes of 6 at rate 1/5: P(0) = 0.262144, P(1) = 0.393216, P(2) = 0.24576; both P(0) and P(1) exceed
    # P(2), so the two-sided p is P(X >= 2) = 1 - 0.262144 - 0.393216.
    result = binomial_test(2, 6, Fraction(1, 5))
    assert result.greater == pytest.approx(0.34464, abs=1e-12)
    assert result.two_sided == pytest.approx(0.34464, abs=1e-12)
    assert result.less == pytest.approx(0.262144 + 0.393216 + 0.24576, abs=1e-12)
    assert binomial_test(0, 4, Fraction(0)).two_sided == 1.0


def test_exact_tests_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    for table in ((11, 30, 6, 30), (0, 5, 5, 5), (7, 12, 2, 9), (1, 20, 4, 7), (30, 30, 29, 30)):
        wins_a, runs_a, wins_b, runs_b = table
        expected = stats.fisher_exact([[wins_a, runs_a - wins_a], [wins_b, runs_b - wins_b]]).pvalue
        assert fisher_exact(*table) == pytest.approx(expected, rel=1e-9), table
    for wins, runs, rate in ((11, 30, Fraction(1, 5)), (3, 30, Fraction(6, 30)), (20, 25, Fraction(2, 3))):
        for alternative, value in (("two-sided", "two_sided"), ("greater", "greater"), ("less", "less")):
            expected = stats.binomtest(wins, runs, float(rate), alternative=alternative).pvalue
            assert getattr(binomial_test(wins, runs, rate), value) == pytest.approx(expected, rel=1e-9)


def test_sign_flip_test_enumerates_every_sign_assignment():
    third = Fraction(1, 3)
    # Five tasks, each one more success of three in B: only all-plus and all-minus reach |5/3|: 2 / 2^5.
    assert sign_flip_test([third] * 5).p == pytest.approx(2 / 32)
    # Scaled by 3: +-1 +-1 +-1 +-2 against |3|; |sum| >= 3 for (a, b) = (3, +), (1, +) x3, (-1, -) x3, (-3, -): 8/16.
    result = sign_flip_test([third, third, -third, 2 * third, Fraction(0)])
    assert (result.p, result.nonzero_tasks) == (0.5, 4)
    assert result.method == "exact over 2^4 sign flips"
    assert sign_flip_test([Fraction(0)] * 3).p == 1.0
    # More than 20 differing tasks stay exact when the sums are few (equal run counts): 2 / 2^25.
    assert sign_flip_test([third] * 25).p == pytest.approx(2 / 2 ** 25)


def test_sign_flip_monte_carlo_is_seeded_and_close_to_the_exact_value():
    differences = [Fraction(value, 3) for value in (1, 2, -1, 3, 1, 1, -2, 2, 1, 3, -1, 2)]
    exact = sign_flip_test(differences)
    estimate = sign_flip_test(differences, seed=3, flips=50_000, exact_limit=4)
    assert estimate.method.startswith("Monte Carlo") and exact.method.startswith("exact")
    assert estimate.p == pytest.approx(exact.p, abs=0.01)
    assert sign_flip_test(differences, seed=3, flips=50_000, exact_limit=4) == estimate
    assert sign_flip_test(differences, seed=4, flips=50_000, exact_limit=4).p != estimate.p


# ---- paired bootstrap ----------------------------------------------------------------------------------------------

def test_resampled_ratios_pool_the_runs_of_the_drawn_tasks():
    outcomes = [outcome("1", "1", True, replans=1), outcome("2", "1", False, replans=9, ended=False)]
    counts = task_counts(outcomes, ("1", "2"))
    picks = np.array([[0, 1], [1, 1], [0, 0]])
    assert counts.resampled("SRR", picks).tolist() == [0.1, 0.0, 1.0]  # pooled 1/10, not the mean of 1 and 0
    assert math.isnan(counts.resampled("SER", picks)[1])  # task 2's run does not end with End: undefined
    assert counts.metric("SER") == 1.0


def test_paired_bootstrap_hand_case_and_seed():
    first = task_counts([outcome("1", "1", True), outcome("2", "1", False)], ("1", "2"))
    second = task_counts([outcome("1", "1", True), outcome("2", "1", True)], ("1", "2"))
    # Per resample B - A in SR is 0 (task 1 twice, p 1/4), 1/2 (mixed) or 1 (task 2 twice, p 1/4).
    intervals = paired_bootstrap(first, second, resamples=10_000, seed=0)
    assert intervals["SR"] == [0.0, 1.0]
    assert paired_bootstrap(first, second, resamples=500, seed=7) == paired_bootstrap(first, second, 500, 7)
    assert paired_bootstrap(first, first, resamples=200)["TP"] == [0.0, 0.0]


def test_paired_bootstrap_covers_the_true_difference():
    generator = np.random.default_rng(11)
    rates = generator.uniform(0.1, 0.7, size=60)
    first, second = [], []
    for task, rate in enumerate(rates):
        for run in range(3):
            first.append(outcome(str(task), str(run), bool(generator.random() < rate)))
            second.append(outcome(str(task), str(run), bool(generator.random() < rate + 0.2)))
    config = ScoringConfig(bootstrap_resamples=4000, seed=5)
    comparison = compare_sides(Side("a", tuple(first)), Side("b", tuple(second)), config)
    low, high = comparison.intervals["SR"]
    assert low < 0.2 < high and low < comparison.differences["SR"] < high
    assert 0.0 < low  # a 20-point gain over 60 tasks is resolved
    assert comparison.sign_flip.p < 0.05 and comparison.significant
    assert compare_sides(Side("a", tuple(first)), Side("b", tuple(second)), config) == comparison


def test_pooled_counts_agree_with_evaluate(handmade):
    tasks = load_tasks(handmade.data_dir, "all")
    runs = load_experiment(handmade.runs_dir).runs
    for config in (ScoringConfig(), ScoringConfig(srr_run="1"), ScoringConfig(compat="official")):
        evaluation = evaluate(runs, tasks, config)
        counts = task_counts(evaluation.outcomes, ("3", "91"), config.srr_run)
        for name in HEADLINE:
            assert counts.metric(name) == pytest.approx(evaluation.summary[name]), (config, name)


# ---- inputs --------------------------------------------------------------------------------------------------------

def test_parse_reference():
    reference = parse_reference("paper HomieBot-7B SFT=6/30")
    assert (reference.label, reference.successes, reference.runs) == ("paper HomieBot-7B SFT", 6, 30)
    assert parse_reference(" 0 / 5 ").label == "reference"
    for text in ("6of30", "7/6", "3/0", "paper=", "=1/2/3", "-1/3"):
        with pytest.raises(CompareError):
            parse_reference(text)


def test_read_conditions(tmp_path):
    assert read_conditions(tmp_path).describe() == "setting background, conditions reliable (not recorded)"
    (tmp_path / "setting.json").write_text(json.dumps({"setting": "no_background", "detector": "x"}))
    assert (read_conditions(tmp_path).setting, read_conditions(tmp_path).conditions) == ("no_background", "reliable")
    (tmp_path / "setting.json").write_text("[1")
    assert read_conditions(tmp_path).problem and read_conditions(tmp_path).setting == "background"


# ---- the command ---------------------------------------------------------------------------------------------------

def test_compare_two_folders_json(handmade, tmp_path, capsys):
    better = always_successful(handmade.runs_dir, tmp_path / "better")
    status, out, _ = run_cli(capsys, "compare", str(handmade.runs_dir), str(better), "--data", str(handmade.data_dir),
                             "--json", "--resamples", "2000")
    assert status == 0
    result = json.loads(out)["comparison"]
    assert result["common_tasks"] == ["3", "91"]
    assert (result["first"]["runs"], result["second"]["runs"]) == (6, 6)
    assert (result["first"]["successes"], result["second"]["successes"]) == (2, 6)
    assert result["first"]["metrics"]["SR"] == pytest.approx(1 / 3)
    assert result["second"]["metrics"] == pytest.approx({"SR": 1.0, "PLWSR": (3 * 7 / 8 + 3) / 6, "TP": 1.0,
                                                         "SRR": 1.0, "SER": 1.0})
    assert result["differences"]["SR"] == pytest.approx(2 / 3)
    # Per task B - A in success rate: +2/3 on both tasks; of the 4 sign assignments, 2 reach |4/3|.
    assert result["sign_flip"] == {"p": 0.5, "nonzero_tasks": 2, "method": "exact over 2^2 sign flips"}
    assert result["fisher_p"] == pytest.approx(56 / 924)
    assert result["confidence_intervals"]["resamples"] == 2000
    assert result["confidence_intervals"]["SR"] == pytest.approx([2 / 3, 2 / 3])
    assert not result["significant"] and result["warnings"] == []
    assert result["verdict"] == ("SR difference +66.67 points (95 % CI +66.67 to +66.67): not significant at 95 % "
                                 "(paired sign-flip p = 0.50; Fisher p = 0.061)")


def test_compare_scores_common_tasks_only_and_prints_the_table(handmade, tmp_path, capsys):
    only_3 = always_successful(handmade.runs_dir, tmp_path / "only_3")
    shutil.rmtree(only_3 / "91")
    status, out, _ = run_cli(capsys, "compare", str(handmade.runs_dir), str(only_3), "--data", str(handmade.data_dir))
    assert status == 0
    assert out.startswith("EMMOE comparison: B - A on 1 common task(s) (split all, compat default; metrics in percent)")
    # A on task 3 alone: SR 1/3, TP (1 + 2/6 + 3/6) / 3 = 61.11.
    assert "  SR         33.33  100.00   +66.67   +66.67 to +66.67" in out
    assert "  TP         61.11  100.00   +38.89" in out
    assert "successes A 1/3, B 3/3 runs" in out
    # Fisher 1/3 against 3/3: weights C(4, x) C(2, 3 - x) for x = 1..3 are 4, 12, 4 of 20: 8/20.
    assert "not significant at 95 % (paired sign-flip p = 1.00; Fisher p = 0.40)" in out
    assert "runs of a task are near-duplicates" in out and "warning" not in out


def test_compare_warns_when_conditions_differ(handmade, tmp_path, capsys):
    other = always_successful(handmade.runs_dir, tmp_path / "paper_runs")
    (other / "setting.json").write_text(json.dumps({"setting": "background", "conditions": "paper"}))
    status, out, _ = run_cli(capsys, "compare", str(handmade.runs_dir), str(other), "--data", str(handmade.data_dir),
                             "--resamples", "100")
    assert status == 0
    assert "  A: exp (6 runs; setting background, conditions reliable (not recorded))" in out
    assert "  B: paper_runs (6 runs; setting background, conditions paper)" in out
    assert "  warning: the comparison mixes settings/conditions" in out
    (other / "setting.json").write_text(json.dumps({"setting": "background"}))
    _, out, _ = run_cli(capsys, "compare", str(handmade.runs_dir), str(other), "--data", str(handmade.data_dir),
                        "--json", "--resamples", "100")
    assert json.loads(out)["comparison"]["warnings"] == []


def test_compare_with_published_counts_only(handmade, capsys):
    status, out, _ = run_cli(capsys, "compare", str(handmade.runs_dir), "--data", str(handmade.data_dir),
                             "--reference", "paper HomieBot-7B SFT=6/30", "--reference", "0/30", "--json")
    assert status == 0
    result = json.loads(out)
    assert result["comparison"] is None
    paper, zero = result["references"]
    assert (paper["label"], paper["successes"], paper["runs"]) == ("paper HomieBot-7B SFT", 2, 6)
    assert paper["fisher_p"] == pytest.approx(fisher_exact(2, 6, 6, 30))
    assert paper["binomial"]["greater"] == pytest.approx(0.34464)
    assert not paper["significant"] and paper["verdict"].startswith(
        "exp SR 33.33 (2/6) vs paper HomieBot-7B SFT 20.00 (6/30): not significant at 95 %")
    # 2/6 against 0/30: weights C(2, x) C(34, 6 - x) for x = 0..2 over C(36, 6); the observed x = 2 is the rarest.
    assert zero["fisher_p"] == pytest.approx(math.comb(34, 4) / math.comb(36, 6))
    assert zero["significant"] and "significant at 95 % (Fisher p = 0.024" in zero["verdict"]
    _, text, _ = run_cli(capsys, "compare", str(handmade.runs_dir), "--data", str(handmade.data_dir),
                         "--reference", "6/30")
    assert text.startswith("EMMOE comparison: A against published counts") and "reference 20.00 (6/30)" in text


@pytest.mark.parametrize(("argv", "message"), [
    (["compare", "{tmp}/missing", "{runs}"], "no such experiment folder"),
    (["compare", "{runs}", "{tmp}/missing"], "no such experiment folder"),
    (["compare", "{runs}"], "compare needs RUNS_B, a --reference, or both"),
    (["compare", "{runs}", "--reference", "six of thirty"], "expected [LABEL=]K/N"),
    (["compare", "{runs}", "--reference", "paper=7/6"], "expected [LABEL=]K/N"),
    (["compare", "{only_3}", "{only_91}"], "have no common task with a scored run"),
])
def test_compare_user_errors_exit_2(handmade, tmp_path, capsys, argv, message):
    for kept in ("3", "91"):
        shutil.copytree(handmade.runs_dir / kept, tmp_path / f"only_{kept}" / kept)
    values = {"tmp": str(tmp_path), "runs": str(handmade.runs_dir), "only_3": str(tmp_path / "only_3"),
              "only_91": str(tmp_path / "only_91")}
    status, out, err = run_cli(capsys, *(part.format(**values) for part in argv), "--data", str(handmade.data_dir))
    assert status == 2 and out == ""
    last = err.strip().splitlines()[-1]
    assert last.startswith("emmoe-eval: error: ") and message in last
    assert "Traceback" not in err


# ---- the report ----------------------------------------------------------------------------------------------------

def test_report_compares_each_experiment_with_the_first(handmade, tmp_path, capsys):
    better = always_successful(handmade.runs_dir, tmp_path / "better")
    (better / "setting.json").write_text(json.dumps({"setting": "background", "conditions": "paper"}))
    out = tmp_path / "report"
    assert main(["report", str(handmade.runs_dir), str(better), "--data", str(handmade.data_dir), "--out",
                 str(out)]) == 0
    capsys.readouterr()
    summary = (out / "summary.md").read_text(encoding="utf-8")
    assert "## Comparison" in summary and "### better against exp" in summary
    assert "| metric | exp | better | better - exp | 95% CI of the difference |" in summary
    assert "| SR | 33.33 | 100.00 | +66.67 | +66.67 to +66.67 |" in summary
    assert ("**SR difference +66.67 points (95 % CI +66.67 to +66.67): not significant at 95 % (paired sign-flip "
            "p = 0.50; Fisher p = 0.061)**") in summary
    assert "Warning: the comparison mixes settings/conditions" in summary
    assert "| 50.00-61.11 | background | reliable |" in summary and "| background | paper |" in summary
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "<h2>Comparison</h2>" in page and "better against exp" in page
    assert "paired sign-flip p = 0.50; Fisher p = 0.061" in page
    assert "setting background, conditions paper" in page and "the comparison mixes settings/conditions" in page

    single = tmp_path / "single"
    assert main(["report", str(handmade.runs_dir), "--data", str(handmade.data_dir), "--out", str(single)]) == 0
    assert "Comparison" not in (single / "summary.md").read_text(encoding="utf-8")
    assert "<h2>Comparison</h2>" not in (single / "index.html").read_text(encoding="utf-8")


def test_report_notes_experiments_without_common_tasks(handmade, tmp_path, capsys):
    for kept in ("3", "91"):
        shutil.copytree(handmade.runs_dir / kept, tmp_path / f"only_{kept}" / kept)
    out = tmp_path / "report"
    assert main(["report", str(tmp_path / "only_3"), str(tmp_path / "only_91"), "--data", str(handmade.data_dir),
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert "only_3 and only_91 have no common task with a scored run" in (out / "summary.md").read_text()
