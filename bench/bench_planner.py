"""Benchmark: planner overhead (prompt building + parsing, goal < 1 ms) and SmolLM2 per-step latency on CPU, plus
the parse / valid / sensible rates of the untuned SmolLM2 on hand-made states (zero-shot, with the in-context
example, and constrained).

    python bench/bench_planner.py [--threads 2] [--overhead-steps 2000] [--states 10] [--max-new-tokens 96] [--seed 0]
                                  [--skip-smollm2]

Prints the figures and writes bench/results/planner.json. "sensible" means the subtask (action and targets, names
compared through the alias table) is one a human annotator accepts for the state; the states are listed in STATES.
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

from emmoe_eval.names import default_alias_table
from emmoe_eval.protocol import SubtaskText, feedback_for

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
        self.prompt_tokens: list[int] = []
        self.seconds = 0.0
        self._generate = model.generate
        model.generate = self

    def __call__(self, **kwargs: Any) -> Any:
        started = time.perf_counter()
        output = self._generate(**kwargs)
        self.seconds += time.perf_counter() - started
        prompt = kwargs["input_ids"].shape[1]
        self.prompt_tokens.append(prompt)
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


def smollm2_figures(threads: int, states: int, max_new_tokens: int, seed: int) -> dict[str, Any]:
    """Load time, per-step latency and rates of SmolLM2 under the three settings."""
    import torch

    from homiebot_planner.backends.smollm2 import SmolLM2Backend, SmolLM2Config

    started = time.perf_counter()
    backend = SmolLM2Backend(SmolLM2Config(num_threads=threads))
    load_seconds = time.perf_counter() - started
    meter = GenerationMeter(backend.loaded.model)
    settings = {
        "zero-shot": (False, False),
        "in-context example": (True, False),
        "constrained (with example)": (True, True),
    }
    figures: dict[str, Any] = {"load_seconds": round(load_seconds, 2), "threads": threads,
                               "decode_tokens_per_s": decode_rate(backend), "settings": {}}
    for label, (example, constrained) in settings.items():
        torch.manual_seed(seed)  # temperature 0.2 samples: the same seed makes the figures repeatable
        backend.config = replace(backend.config, constrained=constrained)
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
        figures["settings"][label] = {
            "states": count,
            "parse_rate": sum(row["parsed"] for row in rows) / count,
            "valid_rate": sum(row["valid"] for row in rows) / count,
            "sensible_rate": sum(row["sensible"] for row in rows) / count,
            "actions": dict(Counter(row["subtask"].split(",")[0].strip("[]") if row["subtask"] else "unparsed"
                                    for row in rows)),
            "step_median_s": round(statistics.median(step_seconds), 2),
            # New tokens over the whole generate time, prompt encoding included.
            "tokens_per_s": round(meter.tokens / meter.seconds, 1) if meter.seconds else 0.0,
            "new_tokens_per_step": round(meter.tokens / count, 1),
            "rows": rows,
        }
    figures["prompt_tokens_median"] = statistics.median(meter.prompt_tokens) if meter.prompt_tokens else 0
    return figures


def main() -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads for SmolLM2")
    parser.add_argument("--overhead-steps", type=int, default=2000, help="repetitions of the overhead measurement")
    parser.add_argument("--states", type=int, default=len(STATES), help="hand-made states to run (max 10)")
    parser.add_argument("--max-new-tokens", type=int, default=96, help="cap on tokens of unconstrained samples")
    parser.add_argument("--seed", type=int, default=0, help="torch seed set before each setting")
    parser.add_argument("--skip-smollm2", action="store_true", help="only measure the overhead")
    args = parser.parse_args()

    results: dict[str, Any] = {"machine": platform.processor() or platform.machine(),
                               "python": platform.python_version(), "cpus": os.cpu_count(),
                               "load_average_before": os.getloadavg()[0]}
    results["overhead"] = overhead(args.overhead_steps)
    print("prompt building + parsing per step: median {decide_median_ms:.3f} ms (user message "
          "{user_message_median_ms:.3f} ms, parse {parse_median_ms:.4f} ms); goal < 1 ms".format(**results["overhead"]))
    if not args.skip_smollm2:
        results["smollm2"] = figures = smollm2_figures(args.threads, min(args.states, len(STATES)),
                                                       args.max_new_tokens, args.seed)
        print(f"SmolLM2-135M-Instruct (transformers fp32, {args.threads} threads): load {figures['load_seconds']} s, "
              f"median prompt {figures['prompt_tokens_median']} tokens, pure decoding "
              f"{figures['decode_tokens_per_s']} tokens/s; per setting, tokens/s counts prompt encoding in")
        for label, row in figures["settings"].items():
            print(f"  {label:28s} step median {row['step_median_s']:5.2f} s  {row['tokens_per_s']:5.1f} tokens/s  "
                  f"parse {row['parse_rate']:4.0%}  valid {row['valid_rate']:4.0%}  "
                  f"sensible {row['sensible_rate']:4.0%}"
                  f"  ({row['states']} states; actions {row['actions']})")
    results["load_average_after"] = os.getloadavg()[0]
    print(f"1-minute load average before/after: {results['load_average_before']:.1f} / "
          f"{results['load_average_after']:.1f} on {results['cpus']} CPUs (other processes slow the figures down)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
