#!/usr/bin/env bash
# The main job: sets up .venv, then runs the default PER vs uniform SAC comparison on the pairs env
# (about 20 minutes on a 2-core machine: docs/guide/comparison.md, Presets; results in results/default/). Extra arguments go to
# scripts/compare.py.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_env.sh experiments
.venv/bin/python scripts/compare.py "$@"
