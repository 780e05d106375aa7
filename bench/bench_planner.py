"""Benchmark: planner overhead (prompt building + parsing, goal < 1 ms), SmolLM2 per-step latency on CPU (the old
generate() path against the fast path, prefix cache + trie walk, in the same process on the same states), the
planner's memory over many consecutive steps, dtype, thread and Analysis-cap variants, plus the parse / valid /
sensible rates of the untuned SmolLM2 on hand-made states (zero-shot, with the in-context example, and constrained).

    python bench/bench_planner.py [--threads 2] [--overhead-steps 2000] [--states 10] [--max-new-tokens 96] [--seed 0]
                                  [--repeats 3] [--rss-steps 300] [--dtypes float32,bfloat16,int8] [--thread-counts 1,2]
                                  [--analysis-caps 16,32] [--skip-rates] [--skip-smollm2]

Prints the figures and writes bench/results/planner.json. "sensible" means the subtask (action and targets, names
compared through the alias table) is one a human annotator accepts for the state; the states are listed in STATES.
Old and new path are timed alternately on each state with greedy decoding (temperature 0), after one untimed
warm-up step each, `--repeats` times (the fastest of each counts, as other processes only add time); "identical"
compares all their raw answers. Absolute timings depend on what else runs on the machine (the load averages are
printed); the old/new ratio is measured in one process and is the steadier figure.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from emmoe_core.names import default_alias_table
from emmoe_core.protocol import SubtaskText, feedback_for

from homiebot_planner.backends import MockBackend, MockConfig, PlannerBackend
from homiebot_planner.backends.expert import default_model
from homiebot_planner.parsing import is_valid, parse_output
from homiebot_planner.planner import Observation, Planner, PlannerConfig

RESULTS = Path(__file__).resolve().parent / "results" / "planner.json"
ANSWER = "Analysis: The apple lies on the table in front of me, so I pick it up.\nSubtask: [Pick, apple]\nModel: RT-1-X"


@dataclass(frozen=True)
class State:
    """A hand-made planner state: task, executed steps, what is visible, and the subtasks a person would accept."""

    name: str
    task: str
    executed: tuple[tuple[SubtaskText, bool, str], ...]
    visible: dict[str, list[str]]
    accepted: tuple[SubtaskText, ...]


def _ok(action: str, target: str = "", place: str = "") -> tuple[SubtaskText, bool, str]:
    return SubtaskText(action, target, place), True, "None"


STATES: tuple[State, ...] = (
    State("go to the object", "pick up the apple from the table", (),
          {"front": ["frl_apartment_table_01", "013_apple"], "left": ["frl_apartment_sofa"]},
          (SubtaskText("Go to", "apple"), SubtaskText("Go to", "table"))),
    State("pick after arriving", "pick up the apple from the table", (_ok("Go to", "apple"),),
          {"front": ["frl_apartment_table_01", "013_apple"], "left": ["frl_apartment_sofa"]},
          (SubtaskText("Pick", "apple"),)),
    State("carry to the goal", "put the apple on the sofa", (_ok("Go to", "apple"), _ok("Pick", "apple")),
          {"front": ["frl_apartment_table_01"], "back": ["frl_apartment_sofa"]},
          (SubtaskText("Go to", "sofa"),)),
    State("put at the goal", "put the bowl on the sofa",
          (_ok("Go to", "bowl"), _ok("Pick", "bowl"), _ok("Go to", "sofa")),
          {"front": ["frl_apartment_sofa"], "right": ["frl_apartment_table_01"]},
          (SubtaskText("Put", "bowl", "sofa"),)),
    State("open before taking out", "take the apple out of the fridge", (_ok("Go to", "fridge"),),
          {"front": ["frl_apartment_refrigerator", "kitchen_counter"]},
          (SubtaskText("Open", "fridge"),)),
    State("put into the opened fridge", "put the apple in the fridge",
          (_ok("Go to", "fridge"), _ok("Open", "fridge"), _ok("Go to", "apple"), _ok("Pick", "apple"),
           _ok("Go to", "fridge")),
          {"front": ["frl_apartment_refrigerator"], "back": ["frl_apartment_table_01"]},
          (SubtaskText("Put", "apple", "fridge"),)),
    State("end when done", "put the apple on the sofa",
          (_ok("Go to", "apple"), _ok("Pick", "apple"), _ok("Go to", "sofa"), _ok("Put", "apple", "sofa")),
          {"front": ["frl_apartment_sofa", "013_apple"]},
          (SubtaskText("End"),)),
    State("re-plan after far away", "pick up the green can on the tv stand",
          ((SubtaskText("Pick", "green_can"), False, feedback_for("D1", "Pick")),),
          {"front": ["frl_apartment_tvstand", "010_potted_meat_can"], "left": ["frl_apartment_sofa"]},
          (SubtaskText("Go to", "green_can"), SubtaskText("Go to", "tvstand"))),
    State("open the drawer", "open the drawer in the kitchen", (_ok("Go to", "kitchen_counter"),),
          {"front": ["kitchen_counter"], "left": ["frl_apartment_refrigerator"]},
          (SubtaskText("Open", "kitchen_counter"), SubtaskText("Open", "drawer"))),
    State("navigate", "go to the sofa", (),
          {"back": ["frl_apartment_sofa"], "front": ["frl_apartment_table_01"]},
          (SubtaskText("Go to", "sofa"),)),
)


def prepared_planner(backend: PlannerBackend, state: State, config: PlannerConfig) -> Planner:
    """A planner whose memory holds the state's executed steps, each with a well-formed earlier answer in the
    conversation (as a planner that had chosen those steps would have written it)."""
    planner = Planner(backend, state.task, config)
    observation = Observation(visible=state.visible)
    for subtask, success, feedback in state.executed:
        user = planner.user_message(observation)
        analysis = f"The next step towards the task is to {subtask.action.lower()} {subtask.target or 'now'}."
        planner.memory.add_round(user, f"Analysis: {analysis}\nSubtask: {subtask}\nModel: {default_model(subtask)}")
        planner.memory.record_execution(planner.memory.next_round - 1, subtask, success, feedback)
    return planner


def accepted(state: State, subtask: SubtaskText) -> bool:
    """Whether a subtask is one of the state's accepted answers (targets compared through the alias table)."""
    table = default_alias_table()
    for answer in state.accepted:
        if answer.action == subtask.action and all(
                (not want and not got) or (want and got and table.same(want, got))
                for want, got in ((answer.target, subtask.target), (answer.place, subtask.place))):
            return True
    return False


def median_ms(function: Callable[[], Any], repeats: int) -> float:
    """Median wall time of a call in milliseconds."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        function()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def overhead(steps: int) -> dict[str, float]:
    """Prompt building + parsing per planner step with an instant backend (full 3-round window, text mode)."""
    backend = MockBackend(MockConfig(outputs=(ANSWER,), observation_mode="text"))
    state = STATES[5]
    planner = prepared_planner(backend, state, PlannerConfig(in_context_example=True))
    observation = Observation(visible=state.visible)

    def step() -> None:
        planner.decide(observation)
        planner.memory.rounds.pop()  # keep the state identical between repetitions

    return {
        "decide_median_ms": median_ms(step, steps),
        "user_message_median_ms": median_ms(lambda: planner.user_message(observation), steps),
        "parse_median_ms": median_ms(lambda: parse_output(ANSWER), steps),
    }


class GenerationMeter:
    """Wraps model.generate to count new tokens and generation time."""

    def __init__(self, model: Any) -> None:
        self.tokens = 0
        self.seconds = 0.0
        self._generate = model.generate
        model.generate = self

    def __call__(self, **kwargs: Any) -> Any:
        started = time.perf_counter()
        output = self._generate(**kwargs)
        self.seconds += time.perf_counter() - started
        prompt = kwargs["input_ids"].shape[1]
        sequences = getattr(output, "sequences", output)  # generate returns a dict when asked for the cache
        self.tokens += sequences.shape[1] - prompt
        return output


def decode_rate(backend: Any, new_tokens: int = 32, repeats: int = 3) -> float:
    """Pure decoding speed: median new tokens per second after a short prompt (greedy, no early stop)."""
    import torch

    prompt = backend.loaded.tokenizer("The robot", return_tensors="pt")
    rates = []
    with torch.inference_mode():
        for _ in range(repeats):
            started = time.perf_counter()
            backend.loaded.model.generate(**prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                          do_sample=False, pad_token_id=backend.loaded.tokenizer.eos_token_id)
            rates.append(new_tokens / (time.perf_counter() - started))
    return round(statistics.median(rates), 1)


# Greedy constrained steps with the in-context example: the setting old and new path are compared in.
GREEDY = PlannerConfig(in_context_example=True, max_samples=1, temperature=0.0)
DTYPES = ("float32", "bfloat16", "int8")


class ForwardMeter:
    """Counts the model's forward passes and the tokens they encode (a forward hook; generate() included)."""

    def __init__(self, model: Any) -> None:
        self.passes = 0
        self.tokens = 0
        model.register_forward_pre_hook(self._count, with_kwargs=True)

    def _count(self, module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.passes += 1
        self.tokens += int(ids.shape[-1]) if ids is not None else 0

    def take(self) -> tuple[int, int]:
        """(passes, tokens) since the last call."""
        counts = (self.passes, self.tokens)
        self.passes = self.tokens = 0
        return counts


def greedy_step(backend: Any, state: State, prefix_cache: bool) -> tuple[float, str]:
    """(planning seconds, raw answer) of one greedy constrained step on `state`, old path or fast path."""
    backend.config = replace(backend.config, constrained=True, prefix_cache=prefix_cache)
    decision = prepared_planner(backend, state, GREEDY).decide(Observation(visible=state.visible))
    return decision.planning_seconds, decision.raw_output


def counted_step(backend: Any, meter: ForwardMeter, state: State, prefix_cache: bool) -> tuple[int, int]:
    """(forward passes, encoded tokens) of one greedy constrained step."""
    meter.take()
    greedy_step(backend, state, prefix_cache)
    return meter.take()


def path_comparison(backend: Any, states: tuple[State, ...], repeats: int) -> dict[str, Any]:
    """Old path against fast path on every state, alternately, plus the fast path once more on the same prompt (what
    a re-sample costs). The states are gone through `repeats` times, so each fast step starts from the previous
    state's prompt, as consecutive steps of a run do; each path's fastest repetition counts (other processes only
    ever add time). Forward passes and encoded tokens are counted in a first, untimed pass."""
    meter = ForwardMeter(backend.loaded.model)
    greedy_step(backend, states[-1], True)
    counts = {state.name: (*counted_step(backend, meter, state, False), *counted_step(backend, meter, state, True))
              for state in states}
    times: dict[str, dict[str, list[float]]] = {state.name: {"old": [], "new": [], "again": []} for state in states}
    outputs: dict[str, set[str]] = {state.name: set() for state in states}
    for _ in range(repeats):
        for state in states:
            for label, prefix_cache in (("old", False), ("new", True), ("again", True)):
                seconds, output = greedy_step(backend, state, prefix_cache)
                times[state.name][label].append(seconds)
                outputs[state.name].add(output)
    rows = []
    for state in states:
        fastest = {label: round(min(values), 3) for label, values in times[state.name].items()}
        old_passes, old_tokens, new_passes, new_tokens = counts[state.name]
        rows.append({"state": state.name, "old_s": fastest["old"], "new_s": fastest["new"],
                     "resample_s": fastest["again"], "identical": len(outputs[state.name]) == 1,
                     "old_passes": old_passes, "old_tokens": old_tokens, "new_passes": new_passes,
                     "new_tokens": new_tokens, "new_output": sorted(outputs[state.name])[0]})
    old = statistics.median(row["old_s"] for row in rows)
    new = statistics.median(row["new_s"] for row in rows)
    return {"repeats": repeats, "old_step_median_s": round(old, 3), "new_step_median_s": round(new, 3),
            "ratio": round(old / new, 2),
            "resample_median_s": round(statistics.median(row["resample_s"] for row in rows), 3),
            "identical_on_every_state": all(row["identical"] for row in rows), "rows": rows}


def rss_mb() -> float:
    """This process's resident memory in MB (Linux)."""
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def rss_figures(backend: Any, steps: int, seed: int) -> dict[str, Any]:
    """Resident memory over consecutive fast-path steps at the node's default temperature, cycling the states."""
    import torch

    torch.manual_seed(seed)
    backend.config = replace(backend.config, constrained=True, prefix_cache=True)
    config = replace(GREEDY, temperature=0.2)
    samples, seconds = [], []
    for step in range(steps):
        state = STATES[step % len(STATES)]
        seconds.append(prepared_planner(backend, state, config).decide(Observation(visible=state.visible))
                       .planning_seconds)
        samples.append(rss_mb())
    settled = samples[min(len(samples) - 1, len(STATES) - 1)]  # after one pass over the states
    return {"steps": steps, "step_median_s": round(statistics.median(seconds), 3),
            "rss_mb_first": round(samples[0], 1), "rss_mb_after_one_pass": round(settled, 1),
            "rss_mb_last": round(samples[-1], 1), "rss_mb_max": round(max(samples), 1),
            "growth_after_one_pass_mb": round(samples[-1] - settled, 1)}


def model_variant(model: Any, dtype: str) -> Any:
    """A copy of a float32 model in bfloat16, or with int8 dynamic quantization of its linear layers."""
    import copy
    import warnings

    import torch

    variant = copy.deepcopy(model)
    if dtype == "bfloat16":
        return variant.to(torch.bfloat16)
    if dtype == "int8":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao's eager quantization warns that it is deprecated
            return torch.ao.quantization.quantize_dynamic(variant, {torch.nn.Linear}, dtype=torch.qint8)
    return variant


def dtype_figures(backend: Any, states: tuple[State, ...], dtypes: list[str],
                  reference: dict[str, Any]) -> dict[str, Any]:
    """Fast-path latency and decisions per dtype, against the float32 fast path of `path_comparison`."""
    from homiebot_planner.backends.hf import HFBackend, LoadedModel

    figures: dict[str, Any] = {}
    expected = {row["state"]: row["new_output"] for row in reference["rows"]}
    for dtype in dtypes:
        if dtype == "float32":
            figures[dtype] = {"step_median_s": reference["new_step_median_s"], "identical_to_float32": True}
            continue
        loaded = LoadedModel(model_variant(backend.loaded.model, dtype), backend.loaded.tokenizer, None)
        variant = HFBackend(replace(backend.config, prefix_cache=True), loaded=loaded)
        greedy_step(variant, states[-1], True)
        rows = [(state.name, *greedy_step(variant, state, True)) for state in states]
        differing = [name for name, _, output in rows if output != expected[name]]
        figures[dtype] = {"step_median_s": round(statistics.median(seconds for _, seconds, _ in rows), 3),
                          "identical_to_float32": not differing, "differing_states": differing}
        del variant, loaded
    return figures


def thread_figures(backend: Any, states: tuple[State, ...], counts: list[int]) -> dict[int, float]:
    """Fast-path median step per torch intra-op thread count."""
    import torch

    before = torch.get_num_threads()
    medians = {}
    for count in counts:
        torch.set_num_threads(count)
        greedy_step(backend, states[-1], True)
        medians[count] = round(statistics.median(greedy_step(backend, state, True)[0] for state in states), 3)
    torch.set_num_threads(before)
    return medians


def cap_figures(backend: Any, states: tuple[State, ...], caps: list[int]) -> dict[int, dict[str, float]]:
    """Fast-path median step and sensible rate per Analysis cap (greedy), to weigh the cap's cost."""
    before = backend.config.analysis_max_tokens
    figures = {}
    for cap in caps:
        backend.config = replace(backend.config, analysis_max_tokens=cap)
        rows = [(state, *greedy_step(backend, state, True)) for state in states]
        sensible = [(parsed := parse_output(output)) is not None and accepted(state, parsed.subtask)
                    for state, _, output in rows]
        figures[cap] = {"step_median_s": round(statistics.median(seconds for _, seconds, _ in rows), 3),
                        "sensible_rate": sum(sensible) / len(sensible)}
    backend.config = replace(backend.config, analysis_max_tokens=before)
    return figures


def rate_figures(backend: Any, states: int, max_new_tokens: int, seed: int) -> dict[str, Any]:
    """Parse / valid / sensible rates and latency of SmolLM2 under the three settings (the default, fast path)."""
    import torch

    meter = GenerationMeter(backend.loaded.model)
    settings = {
        "zero-shot": (False, False),
        "in-context example": (True, False),
        "constrained (with example)": (True, True),
    }
    figures: dict[str, Any] = {}
    for label, (example, constrained) in settings.items():
        torch.manual_seed(seed)  # temperature 0.2 samples: the same seed makes the figures repeatable
        backend.config = replace(backend.config, constrained=constrained, prefix_cache=True)
        config = PlannerConfig(in_context_example=example, max_samples=1, max_new_tokens=max_new_tokens)
        rows: list[dict[str, Any]] = []
        step_seconds = []
        meter.tokens, meter.seconds = 0, 0.0
        for state in STATES[:states]:
            planner = prepared_planner(backend, state, config)
            decision = planner.decide(Observation(visible=state.visible))
            step_seconds.append(decision.planning_seconds)
            parsed = parse_output(decision.raw_output)
            rows.append({"state": state.name, "parsed": parsed is not None, "valid": is_valid(parsed),
                         "sensible": parsed is not None and accepted(state, parsed.subtask),
                         "subtask": str(parsed.subtask) if parsed else None, "raw_output": decision.raw_output})
        count = len(rows)
        figures[label] = {
            "states": count,
            "parse_rate": sum(row["parsed"] for row in rows) / count,
            "valid_rate": sum(row["valid"] for row in rows) / count,
            "sensible_rate": sum(row["sensible"] for row in rows) / count,
            "actions": dict(Counter(row["subtask"].split(",")[0].strip("[]") if row["subtask"] else "unparsed"
                                    for row in rows)),
            "step_median_s": round(statistics.median(step_seconds), 2),
            # New tokens over the whole generate time, prompt encoding included (constrained answers do not call
            # generate(): none counted).
            "tokens_per_s": round(meter.tokens / meter.seconds, 1) if meter.seconds else None,
            "rows": rows,
        }
    return figures


def smollm2_figures(args: argparse.Namespace) -> dict[str, Any]:
    """Load time, old/new path, memory, dtype and thread variants and rates of SmolLM2."""
    from homiebot_planner.backends.smollm2 import SmolLM2Backend, SmolLM2Config

    states = STATES[:min(args.states, len(STATES))]
    started = time.perf_counter()
    backend = SmolLM2Backend(SmolLM2Config(num_threads=args.threads))
    figures: dict[str, Any] = {"load_seconds": round(time.perf_counter() - started, 2), "threads": args.threads,
                               "decode_tokens_per_s": decode_rate(backend)}
    figures["paths"] = path_comparison(backend, states, args.repeats)
    figures["prefix_tokens"] = {"reused": backend.fast.prefix.reused_tokens,
                                "encoded": backend.fast.prefix.encoded_tokens}
    if args.rss_steps:
        figures["rss"] = rss_figures(backend, args.rss_steps, args.seed)
    dtypes = [name for name in args.dtypes.split(",") if name]
    figures["dtypes"] = dtype_figures(backend, states, dtypes, figures["paths"])
    counts = [int(count) for count in args.thread_counts.split(",") if count]
    figures["thread_counts"] = thread_figures(backend, states, counts)
    figures["analysis_caps"] = cap_figures(backend, states, [int(cap) for cap in args.analysis_caps.split(",") if cap])
    if not args.skip_rates:
        figures["settings"] = rate_figures(backend, len(states), args.max_new_tokens, args.seed)
    return figures


def print_smollm2(figures: dict[str, Any], threads: int) -> None:
    """The SmolLM2 figures, one line each."""
    paths = figures["paths"]
    print(f"SmolLM2-135M-Instruct (transformers fp32, {threads} threads): load {figures['load_seconds']} s, pure "
          f"decoding {figures['decode_tokens_per_s']} tokens/s")
    print(f"  greedy constrained step, {len(paths['rows'])} states: old path median "
          f"{paths['old_step_median_s']:.3f} s, "
          f"fast path {paths['new_step_median_s']:.3f} s (ratio {paths['ratio']:.2f}x; a re-sample "
          f"{paths['resample_median_s']:.3f} s); identical decisions on every state: "
          f"{paths['identical_on_every_state']}")
    for row in paths["rows"]:
        print(f"    {row['state']:28s} old {row['old_s']:6.3f} s  new {row['new_s']:6.3f} s  "
              f"re-sample {row['resample_s']:6.3f} s  identical {row['identical']}  forward passes/tokens old "
              f"{row['old_passes']}/{row['old_tokens']} new {row['new_passes']}/{row['new_tokens']}")
    print(f"  prompt tokens taken from the prefix cache {figures['prefix_tokens']['reused']}, encoded "
          f"{figures['prefix_tokens']['encoded']}")
    if "rss" in figures:
        rss = figures["rss"]
        print(f"  RSS over {rss['steps']} consecutive steps (temperature 0.2, median step {rss['step_median_s']} s): "
              f"first {rss['rss_mb_first']} MB, after one pass over the states {rss['rss_mb_after_one_pass']} MB, "
              f"last {rss['rss_mb_last']} MB, max {rss['rss_mb_max']} MB "
              f"(growth after one pass {rss['growth_after_one_pass_mb']} MB)")
    for dtype, row in figures["dtypes"].items():
        print(f"  fast path in {dtype:9s} median {row['step_median_s']:.3f} s, identical to float32: "
              f"{row['identical_to_float32']} {row.get('differing_states') or ''}")
    for count, median in figures["thread_counts"].items():
        print(f"  fast path with {count} torch thread(s): median {median:.3f} s")
    for cap, row in figures["analysis_caps"].items():
        print(f"  fast path with the Analysis capped at {cap:3d} tokens: median {row['step_median_s']:.3f} s, "
              f"sensible {row['sensible_rate']:4.0%}")
    for label, row in figures.get("settings", {}).items():
        rate = f"{row['tokens_per_s']:5.1f} tokens/s" if row["tokens_per_s"] else "  (no generate)"
        print(f"  {label:28s} step median {row['step_median_s']:5.2f} s  {rate}  parse {row['parse_rate']:4.0%}  "
              f"valid {row['valid_rate']:4.0%}  sensible {row['sensible_rate']:4.0%}"
              f"  ({row['states']} states; actions {row['actions']})")


def main() -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads for SmolLM2")
    parser.add_argument("--overhead-steps", type=int, default=2000, help="repetitions of the overhead measurement")
    parser.add_argument("--states", type=int, default=len(STATES), help="hand-made states to run (max 10)")
    parser.add_argument("--max-new-tokens", type=int, default=96, help="cap on tokens of unconstrained samples")
    parser.add_argument("--seed", type=int, default=0, help="torch seed set before each sampling measurement")
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions of each path per state")
    parser.add_argument("--rss-steps", type=int, default=300, help="consecutive steps of the memory figure (0: skip)")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="comma-separated: float32, bfloat16, int8")
    parser.add_argument("--thread-counts", default="1,2", help="comma-separated torch thread counts to time")
    parser.add_argument("--analysis-caps", default="16,32", help="comma-separated Analysis caps to time (48 is the "
                        "default cap, timed above)")
    parser.add_argument("--skip-rates", action="store_true", help="skip the parse/valid/sensible rates")
    parser.add_argument("--skip-smollm2", action="store_true", help="only measure the overhead")
    args = parser.parse_args()
    unknown = sorted(set(args.dtypes.split(",")) - set(DTYPES) - {""})
    if unknown:
        parser.error(f"unknown dtype(s) {', '.join(unknown)}; choose from {', '.join(DTYPES)}")

    results: dict[str, Any] = {"machine": platform.processor() or platform.machine(),
                               "python": platform.python_version(), "cpus": os.cpu_count(),
                               "load_average_before": os.getloadavg()[0]}
    results["overhead"] = overhead(args.overhead_steps)
    print("prompt building + parsing per step: median {decide_median_ms:.3f} ms (user message "
          "{user_message_median_ms:.3f} ms, parse {parse_median_ms:.4f} ms); goal < 1 ms".format(**results["overhead"]))
    if not args.skip_smollm2:
        results["smollm2"] = smollm2_figures(args)
        print_smollm2(results["smollm2"], args.threads)
    results["load_average_after"] = os.getloadavg()[0]
    print(f"1-minute load average before/after: {results['load_average_before']:.1f} / "
          f"{results['load_average_after']:.1f} on {results['cpus']} CPUs (other processes slow the figures down)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
