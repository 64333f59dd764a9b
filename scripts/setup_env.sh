#!/usr/bin/env bash
# Creates .venv (once) and installs sb3-per with the extras given as $1 (default: experiments).
# torch==2.13.0 is installed first when the venv has no torch: on these machines that pin is a CPU
# wheel on local disk, while an unpinned torch would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-experiments}"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
    .venv/bin/python -m pip install -q torch==2.13.0
fi
.venv/bin/python -m pip install -q -e ".[${extras}]"
