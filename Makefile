# Two set-up commands (README): `make demo` runs the main job, `make test` runs the tests.
# Each creates .venv and installs what it needs on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test]"
	touch $(STAMP)

HOST ?= localhost
PORT ?= 6006

# TensorBoard with the Op Compare tab on the demo logdir: open http://$(HOST):$(PORT)/#op_compare
demo: $(STAMP)
	$(BIN)/tensorboard --logdir demo_logs --host $(HOST) --port $(PORT)

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_readers.py

clean:
	rm -rf $(VENV) build *.egg-info
