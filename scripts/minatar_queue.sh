#!/usr/bin/env bash
# Runs the MinAtar study (scripts/minatar_study.py) to the end in the background's one process, BATCH runs at a time
# (default 2), committing the finished runs and the report after each batch (only docs/results/minatar), so that a
# stopped machine loses at most the run in progress. Stop it with: kill <its pid> (the run in progress is redone on
# the next start). Extra arguments go to minatar_study.py (e.g. --frames 1000000).
#
#     nohup bash scripts/minatar_queue.sh 2 > minatar_queue.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
batch="${1:-2}"
shift || true
results=docs/results/minatar
source scripts/commit_results.sh
while [ "$(.venv/bin/python scripts/minatar_study.py pending "$@")" != 0 ]; do
    .venv/bin/python scripts/minatar_study.py run --max-runs "$batch" "$@"
    left="$(.venv/bin/python scripts/minatar_study.py pending "$@")"
    commit_results "MinAtar study: finished runs and report ($left runs pending)" "$results"
done
echo "minatar_queue: every run of the plan has finished"
