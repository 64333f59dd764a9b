#!/usr/bin/env bash
# Trains the full preset's pending runs of the given variants in the background's one process, one run at a time,
# seeds outermost (so that a partial comparison stays paired), and after each run rebuilds the full preset's report
# from every finished run and commits docs/results/full, so that a stopped machine loses at most the run in progress.
# Stop it with: kill <its pid> (the run in progress is redone on the next start). --seeds FIRST LAST (default 0 19)
# limits it to those seeds, so that two queues on two cores can share the plan without ever training the same run.
#
#     nohup bash scripts/full_queue.sh relo expected_td > full_queue.log 2>&1 &
#     nohup bash scripts/full_queue.sh --seeds 16 19 relo expected_td > full_queue_2.log 2>&1 &
set -euo pipefail
cd "$(dirname "$0")/.."
first=0
last=19
if [ "${1:-}" = "--seeds" ]; then
    if [ "$#" -lt 3 ]; then
        echo "usage: bash scripts/full_queue.sh [--seeds FIRST LAST] VARIANT [VARIANT ...]" >&2
        exit 2
    fi
    first="$2"
    last="$3"
    shift 3
fi
if [ "$#" = 0 ]; then
    echo "usage: bash scripts/full_queue.sh [--seeds FIRST LAST] VARIANT [VARIANT ...]" >&2
    exit 2
fi
results=docs/results/full
source scripts/commit_results.sh
for seed in $(seq "$first" "$last"); do
    for variant in "$@"; do
        .venv/bin/python scripts/compare.py --full --variants "$variant" --seeds "$seed" --workers 1 --no-progress-bar
        .venv/bin/python scripts/compare.py --full --report-only --no-progress-bar
        # this run and the report only: another queue's run in progress must not be committed as finished
        commit_results "Full preset: ${variant} seed ${seed} finished, report rebuilt" \
            "$results/runs/${variant}_s${seed}" "$results"/*.md "$results"/*.csv "$results"/*.png
    done
done
echo "full_queue: seeds ${first}-${last} of ${*} have finished"
