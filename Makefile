# Two set-up commands (README): `make demo` runs the main job, `make test` runs the tests.
# Each creates .venv and installs what it needs on first use: the demo only the plugin
# and TensorBoard (about 400 MB), the tests the test extra too (TensorFlow, PyTorch,
# xprof, Playwright: about 3 GB).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
DEMO_STAMP := $(VENV)/.installed-demo
TEST_STAMP := $(VENV)/.installed-test

.PHONY: demo demo-logs demo-logs-gpu record-demo test check lint bench fuzz load dist clean contract constraints \
	golden-portability

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The optional C extensions (tb_opcompare/*/_*.c, tb_opcompare/ingest/readers/_*.c) are
# compiled into the checkout by the editable install, so editing one must re-run the install.
PACKAGING := pyproject.toml setup.py $(wildcard tb_opcompare/*/_*.c tb_opcompare/ingest/readers/_*.c)

$(DEMO_STAMP): $(PACKAGING) | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

# The test extra installs at the versions CI last passed with (tests/constraints.txt), so a
# fresh clone tests what CI tested; users' installs keep pyproject.toml's ranges.
# --no-compile: pip compiling all 20,000 modules of the extra (TensorFlow, PyTorch, moto...)
# took two minutes of a clean clone's install (3 min 41 s -> 1 min 41 s without); the tests
# compile only the modules they import, once (`make test` lets bytecode be written).
TEST_CONSTRAINTS := tests/constraints.txt
$(TEST_STAMP): $(PACKAGING) $(TEST_CONSTRAINTS) | $(BIN)/python
	$(BIN)/pip install --quiet --no-compile -e ".[test]" -c $(TEST_CONSTRAINTS)
	touch $@ $(DEMO_STAMP)

# Refresh the test constraints from .venv (after upgrading it on purpose and a green run);
# local version labels (torch's +cpu) are dropped so the pins match any build of a version.
constraints: $(TEST_STAMP)
	{ sed -n '/^#/p' $(TEST_CONSTRAINTS); $(BIN)/pip freeze --exclude-editable | sed -E 's/\+[A-Za-z0-9.]+$$//'; } \
		> $(TEST_CONSTRAINTS).new
	mv $(TEST_CONSTRAINTS).new $(TEST_CONSTRAINTS)

HOST ?= localhost
PORT ?= 6006

# TensorBoard with the Op Compare tab on the demo logdir: open http://$(HOST):$(PORT)/#op_compare
demo: $(DEMO_STAMP)
	@echo "Op Compare on demo_logs: http://$(HOST):$(PORT)/#op_compare   (the installed commands: $(BIN)/tb-opcompare, $(BIN)/tensorboard)"
	$(BIN)/tensorboard --logdir demo_logs --host $(HOST) --port $(PORT)

# Re-record the demo's TF and PyTorch runs with the recording helpers (CPU; the GPU part
# on a machine with one). Recording needs TensorFlow and PyTorch: the test extra.
DEMO_BATCH_SIZES ?= 1,16,64
TRAIN_PYTHON ?= $(BIN)/python
demo-logs: $(TEST_STAMP)
	$(MAKE) record-demo DEVICE=cpu

# The test extra pins CPU builds of TensorFlow and torch: on a GPU machine, name an
# interpreter with CUDA builds, e.g. `make demo-logs-gpu TRAIN_PYTHON=/opt/torch/.venv/bin/python3`
# (a GPU run whose framework sees no GPU fails with a message instead of recording the CPU).
demo-logs-gpu: $(TEST_STAMP)
	$(MAKE) record-demo DEVICE=gpu

record-demo:
	rm -rf demo_logs/tf_keras/*_$(DEVICE)_bs* demo_logs/torch/*_$(DEVICE)_bs*
	$(BIN)/tb-opcompare record --logdir demo_logs/tf_keras --model mnist_cnn --batch-sizes $(DEMO_BATCH_SIZES) \
		--devices $(DEVICE) -- $(TRAIN_PYTHON) -m tb_opcompare.demo.mnist_tf --batch-size {batch_size}
	$(BIN)/tb-opcompare record --logdir demo_logs/torch --model mnist_cnn_torch --batch-sizes $(DEMO_BATCH_SIZES) \
		--devices $(DEVICE) -- $(TRAIN_PYTHON) -m tb_opcompare.demo.mnist_torch --batch-size {batch_size}
	rm -f demo_logs/*/*/opcompare-record.log

# The browser tests drive Debian's Chromium (never a downloaded browser).
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" -ne 0 ] && echo sudo)
$(CHROMIUM):
	@echo "installing Debian's chromium for the browser tests"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
		chromium fonts-liberation fonts-dejavu-core >/dev/null

# The tab's view rule runs under node too (tests/js), on the same golden cases as Python.
NODE := /usr/bin/node
$(NODE):
	@echo "installing Debian's nodejs for the tab's JavaScript tests"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends nodejs >/dev/null

# Test files run in parallel, one file per worker (its fixtures, TensorBoard servers and
# browser stay in one process); most of the suite waits on subprocesses, so 2 cores give ~1.6x.
# The fast tier: ruff (lint and format) and mypy (types; both configured in pyproject.toml), the unit tests that
# need neither the public traces of ../shared nor a browser, and the tab's JavaScript
# rules: under 90 s on 2 cores, on a clean clone without ../shared (mypy cold ~30 s, these
# tests ~40 s). The rules of the house (layers, contract, shared rules, requests), the maths
# (tables, numerics, the headline, comparing, pooling, pairing) and each reader's facts; the
# views' end-to-end tests (check, sweep, trend, matrix, modules, layers, memory, read-ahead,
# workers) run in `make test`, which runs all.
FAST_TESTS := $(addprefix tests/test_,$(addsuffix .py,architecture contract shared_rules requests table numerics headline \
	naming_and_pairing compare golden golden_compare model_identity pooling run_facts nesting onnxruntime \
	tf1_and_trace_json torch_reader summary_json xla_work))
check: lint
	OPCOMPARE_REALTRACES_OPTIONAL=1 PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n 2 --dist loadfile -m "not realtraces" $(FAST_TESTS)

# What `make test` does not run: lint, format, types, and the tab's JavaScript rules (CI runs
# this, then `make test`, which runs the fast tier's tests with all the others)
lint: $(TEST_STAMP) $(NODE)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(NODE) --test tests/js

# The tests start many Python processes (the CLI, TensorBoard, workers), each importing
# the plugin afresh: where the environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE,
# set on some CI machines), each compiled the checkout's modules again: `runs` on the demo took
# 9.1 s of CPU, 5.5 s with them compiled once.
test: $(TEST_STAMP) $(CHROMIUM) $(NODE)
	$(BIN)/python tests/environment_report.py
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile --durations=25

# The golden tier and the flag-stability tests under other numerics than the machine's:
# forced OpenBLAS kernels, one BLAS thread, and the newest and the oldest numpy and
# pandas that pyproject.toml admits (each in a venv of its own: the plugin, TensorBoard
# and pytest only). All must pass unchanged: goldens compare numbers to 1e-9.
PORTABLE_TESTS := tests/test_golden.py tests/test_golden_compare.py tests/test_numerics.py
OLDEST_NUMERICS := "numpy==1.24.*" "pandas==2.0.*"
golden-portability: $(TEST_STAMP)
	for kernel in Sandybridge Prescott; do \
		echo "== OPENBLAS_CORETYPE=$$kernel"; \
		OPENBLAS_CORETYPE=$$kernel $(BIN)/python -m pytest -q -p no:cacheprovider $(PORTABLE_TESTS) || exit 1; \
	done
	echo "== OPENBLAS_NUM_THREADS=1"; OPENBLAS_NUM_THREADS=1 $(BIN)/python -m pytest -q -p no:cacheprovider $(PORTABLE_TESTS)
	for numerics in newest oldest; do \
		venv=.venv-numerics-$$numerics; \
		[ -x $$venv/bin/python ] || $(PYTHON) -m venv $$venv || exit 1; \
		if [ $$numerics = oldest ]; then pins='$(OLDEST_NUMERICS)'; else pins="--upgrade numpy pandas"; fi; \
		eval $$venv/bin/pip install --quiet -e . pytest pytest-timeout $$pins || exit 1; \
		echo "== $$numerics numerics: $$($$venv/bin/python -c 'import numpy, pandas; print("numpy", numpy.__version__, "pandas", pandas.__version__)')"; \
		$$venv/bin/python -m pytest -q -p no:cacheprovider $(PORTABLE_TESTS) || exit 1; \
	done

# Long runs of what the suite does briefly: fuzz every reader, load the server for a minute.
fuzz: $(TEST_STAMP)
	TB_OPCOMPARE_FUZZ_EXAMPLES=2000 $(BIN)/python -m pytest -q tests/test_fuzz.py

load: $(TEST_STAMP) $(CHROMIUM)
	TB_OPCOMPARE_LOAD_SECONDS=60 $(BIN)/python -m pytest -q tests/test_load.py

bench: $(TEST_STAMP) $(CHROMIUM)
	$(BIN)/python benchmarks/bench_readers.py
	$(BIN)/python benchmarks/bench_scale.py
	$(BIN)/python benchmarks/bench_many_ops.py
	$(BIN)/python benchmarks/bench_startup.py
	$(BIN)/python benchmarks/bench_first_screen.py
	$(BIN)/python benchmarks/bench_peers.py
	$(BIN)/python benchmarks/bench_bucket.py

# The wheel and sdist users install (the packaging test builds and installs them too).
dist: $(BIN)/python
	rm -rf dist
	$(BIN)/pip install --quiet build
	$(BIN)/python -m build --outdir dist .

clean:
	rm -rf $(VENV) .venv-numerics-* build dist *.egg-info
	rm -f tb_opcompare/ingest/readers/_xplane_wire.*.so

# The HTTP API's doc and the tab's JSDoc types, generated from the typed contract
# (tb_opcompare/schema/contract.py); a test fails when the committed ones drift.
contract: $(DEMO_STAMP)
	$(BIN)/python -m tb_opcompare.schema.contract --write
