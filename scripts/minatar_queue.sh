#!/usr/bin/env bash
# Runs the MinAtar study (scripts/minatar_study.py) to the end in the background's one process, BATCH runs at a time
# (default 2). After each batch it rebuilds the report from every finished run and commits it with the finished run
# folders (a run folder counts once its returns.csv, written last, is there), under a lock that the queues share, so
# that a stopped machine loses at most the run in progress. Stop it with: kill <its pid>, which stops the run in
# progress too (redone on the next start). Extra arguments go to minatar_study.py (e.g. --frames 1000000). On a machine with two free
# cores, two queues share the plan, each with its own --shard, and never train the same run:
#
#     nohup bash scripts/minatar_queue.sh 1 > minatar_queue.log 2>&1 &
#     nohup bash scripts/minatar_queue.sh 1 --shard 0 2 > minatar_queue_0.log 2>&1 &
#     nohup bash scripts/minatar_queue.sh 1 --shard 1 2 > minatar_queue_1.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
batch="${1:-2}"
shift || true
results=docs/results/minatar
source scripts/commit_results.sh
source scripts/child_process.sh
shopt -s nullglob
while [ "$(.venv/bin/python scripts/minatar_study.py pending "$@")" != 0 ]; do
    run_child .venv/bin/python scripts/minatar_study.py run --max-runs "$batch" "$@"
    left="$(.venv/bin/python scripts/minatar_study.py pending "$@")"
    (
        flock 9
        .venv/bin/python scripts/minatar_study.py report "$@"
        finished=("$results"/runs/*/returns.csv)
        commit_results "MinAtar study: finished runs and report ($left runs pending in this queue)" \
            "${finished[@]%/returns.csv}" "$results"/*.md "$results"/*.csv "$results"/*.png
    ) 9> "$(git rev-parse --git-dir)/minatar_queue.lock"
done
echo "minatar_queue: every run of this queue has finished"
