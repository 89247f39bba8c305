# Two set-up commands (README): `make demo` runs the main job, `make test` runs the tests.
# Each creates .venv and installs what it needs on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo demo-logs demo-logs-gpu test bench fuzz load clean

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

# Re-record the demo's TF and PyTorch runs with the recording helpers (CPU; the GPU part
# on a machine with one). The TF1 pair in demo_logs/tf1_mlp is a public recording, kept.
DEMO_BATCH_SIZES ?= 1,16,64
demo-logs: $(STAMP)
	$(MAKE) record-demo DEVICE=cpu

demo-logs-gpu: $(STAMP)
	$(MAKE) record-demo DEVICE=gpu

record-demo:
	rm -rf demo_logs/tf_keras/*_$(DEVICE)_bs* demo_logs/torch/*_$(DEVICE)_bs*
	$(BIN)/tb-opcompare record --logdir demo_logs/tf_keras --model mnist_cnn --batch-sizes $(DEMO_BATCH_SIZES) \
		--devices $(DEVICE) -- $(BIN)/python -m tb_opcompare.demo.mnist_tf --batch-size {batch_size}
	$(BIN)/tb-opcompare record --logdir demo_logs/torch --model mnist_cnn_torch --batch-sizes $(DEMO_BATCH_SIZES) \
		--devices $(DEVICE) -- $(BIN)/python -m tb_opcompare.demo.mnist_torch --batch-size {batch_size}
	rm -f demo_logs/*/*/opcompare-record.log

# The browser tests drive Debian's Chromium (never a downloaded browser).
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" -ne 0 ] && echo sudo)
$(CHROMIUM):
	@echo "installing Debian's chromium for the browser tests"
	$(SUDO) apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends \
		chromium fonts-liberation fonts-dejavu-core >/dev/null

test: $(STAMP) $(CHROMIUM)
	$(BIN)/python -m pytest -q

# Long runs of what the suite does briefly: fuzz every reader, load the server for a minute.
fuzz: $(STAMP)
	TB_OPCOMPARE_FUZZ_EXAMPLES=2000 $(BIN)/python -m pytest -q tests/test_fuzz.py

load: $(STAMP) $(CHROMIUM)
	TB_OPCOMPARE_LOAD_SECONDS=60 $(BIN)/python -m pytest -q tests/test_load.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_readers.py
	$(BIN)/python benchmarks/bench_scale.py

clean:
	rm -rf $(VENV) build *.egg-info
