#!/usr/bin/env bash
# A separate virtual environment with lm-eval 0.4.13 for the P2 comparison (bench/p2_lmeval.py).
#
#   bash bench/setup_lmeval.sh [VENV]     # default: ~/.cache/finharness-bench/lmeval-venv
#
# lm-eval pulls torch; kept out of the project's .venv so that `make test` never sees it.
# torch is pinned to 2.13.0 first: on these machines that is a CPU wheel lying on disk (pip's
# find-links, /opt/wheels), while a plain `torch` would download a CUDA build of several GB.
# Idempotent: a venv whose lm_eval already imports is left as it is.
set -euo pipefail

VENV="${1:-${FINHARNESS_LMEVAL_VENV:-$HOME/.cache/finharness-bench/lmeval-venv}}"
PYTHON="${PYTHON:-python3}"
LM_EVAL_VERSION="0.4.13"
TORCH_VERSION="2.13.0"

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import lm_eval, sys; \
    from importlib.metadata import version; sys.exit(version('lm_eval') != '$LM_EVAL_VERSION')" 2>/dev/null; then
  echo "lm-eval $LM_EVAL_VERSION already in $VENV"
  exit 0
fi

"$PYTHON" -m venv "$VENV"
export PIP_DISABLE_PIP_VERSION_CHECK=1
find_links=()
[ -d /opt/wheels ] && find_links=(--find-links /opt/wheels)
"$VENV/bin/python" -m pip install --quiet "${find_links[@]}" "torch==$TORCH_VERSION"
# The torch pin rides along as a constraint so that no dependency upgrades it to a CUDA build.
"$VENV/bin/python" -m pip install --quiet "${find_links[@]}" "lm-eval==$LM_EVAL_VERSION" "torch==$TORCH_VERSION"
"$VENV/bin/python" -c "import lm_eval, torch; from importlib.metadata import version; \
print(f'lm-eval {version(\"lm_eval\")}, torch {torch.__version__} in $VENV')"
