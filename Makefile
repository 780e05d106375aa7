# HomieBot: every target sets the checkout up first (idempotent; seconds when nothing changed).
SHELL := /bin/bash
ENV := set -o pipefail; . ./env.sh &&
PYTEST := python -m pytest

.PHONY: setup run test test-slow test-all bench lock clean

setup:
	@bash scripts/setup.sh

# The main job on the embedded default: three EMMOE test tasks, one run each, HomieBot-135M (SmolLM2-135M-Instruct
# with the LoRA adapter in models/homiebot-135m) planning in the MuJoCo apartment through the whole ROS 2 stack.
# Reruns resume. The full protocol: homiebot run --tasks test --runs 3 --out runs/<exp>
RUN_ARGS ?= --tasks 91,95,99 --runs 1 --planner homiebot --out runs/homiebot_demo
run: setup
	@$(ENV) homiebot doctor > /dev/null || homiebot doctor
	@$(ENV) homiebot run $(RUN_ARGS)

# The default test suite (excludes tests marked slow or gpu), on every core (pytest-xdist; each ROS test leases its own
# ROS_DOMAIN_ID). PARALLEL="-n 0" runs it in one process.
PARALLEL ?= -n auto --dist worksteal
test: setup
	@$(ENV) $(PYTEST) $(PARALLEL) $(PYTEST_ARGS); bash scripts/pytest_status.sh $$?

# Only the slow tests (real models, long simulations).
test-slow: setup
	@$(ENV) $(PYTEST) -m slow $(PYTEST_ARGS); bash scripts/pytest_status.sh $$?

test-all: setup
	@$(ENV) $(PYTEST) -m "not gpu" $(PYTEST_ARGS); bash scripts/pytest_status.sh $$?

# Benchmarks print their figures (and write bench/results/*.json).
bench: setup
	@$(ENV) for script in bench/bench_*.py; do echo "== $$script"; python "$$script" || exit 1; done

# Refresh requirements/lock.txt after editing requirements/requirements.in.
lock:
	@bash scripts/lock.sh

clean:
	rm -rf build install log
