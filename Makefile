# kraftlog — two commands for a newcomer: `make run` and `make test`.
# Every install step lives here so that a fresh Debian/Ubuntu machine goes from nothing to green.

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP_RUN := $(VENV)/.installed-run
STAMP_DEV := $(VENV)/.installed-dev
PROTOS := $(wildcard proto/*.proto)
PROTO_OUT := build/proto
FLOORS_VENV := .venv-floors
FLOORS := constraints/floors.txt

# Keep Python's bytecode cache even where the machine's environment turns it off
# (PYTHONDONTWRITEBYTECODE=1): without it every run re-does pytest's assertion rewriting of each
# test module (measured: 16 s of CPU to collect tests/unit) and every node process a test starts
# compiles kraftlog again (~0.35 s of CPU each). An empty value turns it back on.
export PYTHONDONTWRITEBYTECODE :=

.PHONY: run test test-unit test-floors lint proto system-deps system-deps-test venv clean bench fuzz sim soak librdkafka-suite help

help:
	@echo "make run    - create .venv, install kraftlog and run the main job"
	@echo "make test   - install the test extras and run the whole test suite (test-floors first)"
	@echo "make test-unit - only tests/unit: no process, no socket, on every core, well under a minute on 2 (PYTEST_ARGS=... passes on)"
	@echo "make lint   - ruff (lint and format check) and the import-linter layering contracts"
	@echo "make test-floors - tests/unit with every dependency at its floor (constraints/floors.txt), in .venv-floors"
	@echo "make proto  - regenerate the gRPC modules from proto/*.proto"
	@echo "make bench  - run every benchmark in tests/perf (full variants)"
	@echo "make fuzz   - the decoder fuzz tests in tests/fuzz with a long budget (KRAFTLOG_FUZZ_EXAMPLES), then tests/unit's properties with HYPOTHESIS_PROFILE=thorough"
	@echo "make sim    - run the seeded simulation (tests/sim) over many seeds (KRAFTLOG_SIM_SEEDS, default 20000)"
	@echo "make soak   - long chaos runs of every workload (SOAK_DURATION, default 30m each; docs/verification.md)"
	@echo "make librdkafka-suite - librdkafka's own test suite against local clusters (not in make test; needs the network)"

# System packages: python3-venv (Debian ships venv separately). No JRE: `make run` installs kraftlog
# without the [spark] extra; `make test` asks for the JRE (system-deps.sh test).
system-deps:
	@bash deploy/scripts/system-deps.sh run

$(VENV)/bin/python: | system-deps
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

$(STAMP_RUN): pyproject.toml setup.py storage/_cscan.c $(VENV)/bin/python
	$(PIP) install --quiet -e .
	@touch $@

# The dev install must carry the compiled record scan (tests check it): without it the stamp is not
# written, so the next make installs again once a C compiler is there.
$(STAMP_DEV): pyproject.toml setup.py storage/_cscan.c $(VENV)/bin/python
	$(PIP) install --quiet -e '.[dev]'
	@ls storage/_cscan*.so >/dev/null 2>&1 || { echo "the compiled record scan (storage/_cscan.c) was not" \
		"built: install a C compiler and Python's headers (see deploy/scripts/system-deps.sh), then run make again" >&2; \
		exit 1; }
	@touch $@ $(STAMP_RUN)

venv: $(STAMP_RUN)

run: system-deps $(STAMP_RUN)
	$(VENV)/bin/kraftlog local start --dir .kraftlog/cluster --foreground --demo

# system-deps-test before the dev install: it provides the C compiler the install needs
system-deps-test:
	@bash deploy/scripts/system-deps.sh test

test: system-deps system-deps-test $(STAMP_DEV)
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory test-floors
	@$(MAKE) --no-print-directory test-unit
	$(PY) -m pytest --ignore=tests/unit -n 2 --dist loadfile --durations=40 $(PYTEST_ARGS)

# tests/unit's temporary files live in memory where the machine has /dev/shm: the unit tests call fsync
# some 4,300 times (logs, snapshots, checkpoints), which on a disk cost 5-20 s of the run's wall time
# and nothing on tmpfs; the code under test runs the same calls. One folder per checkout (pytest
# empties it at the start of each run; the last run's files stay there to look at).
UNIT_BASETEMP := $(if $(shell test -d /dev/shm -a -w /dev/shm && echo y),/dev/shm/kraftlog-unit-$(shell \
	printf %s '$(CURDIR)' | cksum | cut -d' ' -f1))

# The fast loop while editing: tests/unit only (no process and no socket, tests/unit/conftest.py enforces
# it), no lint and no floors. One test: .venv/bin/python -m pytest tests/unit/storage/test_log.py::test_name
test-unit: $(STAMP_DEV)
	$(PY) -m pytest tests/unit -n auto $(if $(UNIT_BASETEMP),--basetemp=$(UNIT_BASETEMP)) $(PYTEST_ARGS)

# Static checks: ruff check, ruff format --check, mypy (every package; strict for the server side and
# the ground floor), import-linter (deploy/scripts/lint.py; settings in pyproject.toml).
lint: $(STAMP_DEV)
	$(PY) deploy/scripts/lint.py

# The floors in pyproject are true: a wheel install of '.[dev]' with every direct dependency pinned at
# its floor (constraints/floors.txt) into its own venv, then tests/unit there, plus the client's tests
# against its in-process gRPC brokers (real channels at the grpcio floor) (about 4 minutes on 2 cores;
# the first run also builds pyspark's sdist). The venv is kept; kraftlog is reinstalled each run.
FLOORS_CLIENT_TESTS := tests/integration/test_producer.py tests/integration/test_consumer.py \
	tests/integration/test_consumer_corrupt.py
test-floors: system-deps
	test -x $(FLOORS_VENV)/bin/python || { $(PYTHON) -m venv $(FLOORS_VENV) && \
		$(FLOORS_VENV)/bin/pip install --quiet --upgrade pip; }
	$(FLOORS_VENV)/bin/pip install --quiet -c $(FLOORS) '.[dev]'
	$(FLOORS_VENV)/bin/pip install --quiet --no-deps --force-reinstall .
	$(FLOORS_VENV)/bin/pip check
	$(FLOORS_VENV)/bin/python -m pytest tests/unit -n auto -q -p no:cacheprovider \
		$(if $(UNIT_BASETEMP),--basetemp=$(UNIT_BASETEMP)-floors)
	$(FLOORS_VENV)/bin/python -m pytest $(FLOORS_CLIENT_TESTS) -q -p no:cacheprovider

# One target generates every gRPC module; tests/integration/test_proto_fresh.py fails when they are stale.
# protoc sees proto/ as kraftlog/proto/ (the .proto files import "kraftlog/proto/x.proto"), so the
# modules import each other as kraftlog.proto.x and register kraftlog/proto/x.proto in the
# descriptor pool; it writes them under kraftlog/proto/ of its output dir, copied here to proto/.
proto: $(STAMP_DEV)
	rm -rf $(PROTO_OUT) && mkdir -p $(PROTO_OUT)
	$(PY) -m grpc_tools.protoc -Ikraftlog/proto=proto --python_out=$(PROTO_OUT) --grpc_python_out=$(PROTO_OUT) \
		--pyi_out=$(PROTO_OUT) $(PROTOS)
	cp $(PROTO_OUT)/kraftlog/proto/*_pb2* proto/
	rm -rf $(PROTO_OUT)

bench: $(STAMP_DEV)
	@for f in tests/perf/*.py; do echo "== $$f"; $(PY) $$f || exit 1; done

# The fuzz tests also run in `make test` with a short default budget; this runs them long, and then
# tests/unit's property tests (the `hypothesis` marker) with the thorough profile: ten times the
# count each names (`make test-unit` runs a tenth; tests/unit/_hypothesis_budget.py).
fuzz: $(STAMP_DEV)
	KRAFTLOG_FUZZ_EXAMPLES=$${KRAFTLOG_FUZZ_EXAMPLES:-20000} $(PY) -m pytest tests/fuzz -q -p no:cacheprovider
	HYPOTHESIS_PROFILE=$${HYPOTHESIS_PROFILE:-thorough} $(PY) -m pytest tests/unit -m hypothesis -n auto -q \
		-p no:cacheprovider

# The seeded simulation also runs in `make test` over 1,000 seeds per scenario; this runs it long.
# A failure prints its seed and the replay command (PYTHONHASHSEED fixed: set order must not vary).
sim: $(STAMP_DEV)
	PYTHONHASHSEED=0 KRAFTLOG_SIM_SEEDS=$${KRAFTLOG_SIM_SEEDS:-20000} $(PY) -m pytest tests/sim -q -p no:cacheprovider

# Long chaos runs, one per workload (docs/verification.md): queue with and without transactions, data,
# group, eos, share, each a real 6-node cluster of its own for SOAK_DURATION under its profile's default
# faults plus SOAK_FAULTS (comma-separated extra kinds, default the storage, disk, clock and link
# ones; delay_link needs a netns cluster and is skipped on loopback). Each run's report (its last
# line JSON) and the queue runs' histories go to SOAK_DIR; the first failing run stops the target.
# CI runs short versions of each (tests/chaos/); this is the long one, about 3 hours at the default.
# SOAK_RUNS_ONLY="eos share" runs only the named ones (each keeps its seed).
SOAK_DURATION ?= 30m
SOAK_SEED ?= 20262800
SOAK_DIR ?= .soak
SOAK_FAULTS ?= kill_broker,kill_active_controller,pause,restart,kill_minority,partition_active_controller,partition_leader,bitflip_segment,truncate_segment,lose_unsynced,slow_fsync,disk_full,clock_skew,clock_jump,delay_link
SOAK_RUNS := queue:queue queue-no-txn:queue_--queue-no-txn data:data group:group eos:eos share:share
soak: $(STAMP_DEV)
	@mkdir -p $(SOAK_DIR)
	@set -e; seed=$(SOAK_SEED); for run in $(SOAK_RUNS); do \
		name=$${run%%:*}; args=$$(echo $${run#*:} | tr _ ' '); seed=$$((seed + 1)); \
		if [ -n "$(SOAK_RUNS_ONLY)" ] && ! echo " $(SOAK_RUNS_ONLY) " | grep -q " $$name "; then continue; fi; \
		echo "== soak $$name: seed $$seed, $(SOAK_DURATION)"; \
		$(PY) -m kraftlog.cli chaos run --workload $$args --duration $(SOAK_DURATION) --seed $$seed \
			--faults $(SOAK_FAULTS) --work-dir $(SOAK_DIR)/$$name-cluster \
			$$(case $$name in queue*) echo --history $(SOAK_DIR)/$$name-history.jsonl;; esac) \
			> $(SOAK_DIR)/$$name.out; \
		tail -1 $(SOAK_DIR)/$$name.out > $(SOAK_DIR)/$$name.json; \
	done

# librdkafka's own integration tests (its tests/test-runner) against kraftlog clusters, both
# group.protocol values (docs/tests.md). Not part of `make test`: it clones librdkafka (the version of
# the installed confluent-kafka) into .cache/librdkafka, builds it once, and runs for about an hour on
# 2 cores. LIBRDKAFKA_SUITE_ARGS passes on (e.g. --tests 0030,0081 --protocols consumer).
librdkafka-suite: $(STAMP_DEV)
	@bash deploy/scripts/system-deps.sh librdkafka
	$(PY) deploy/scripts/librdkafka_suite.py $(LIBRDKAFKA_SUITE_ARGS)

clean:
	rm -rf $(VENV) $(FLOORS_VENV) build .kraftlog .pytest_cache .hypothesis
