#!/usr/bin/env bash
# The test command: sets up .venv with the dev extra, then runs the whole suite on both cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh dev
.venv/bin/python -m pytest -n 2 --durations=15 "$@"
