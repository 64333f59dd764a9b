#!/usr/bin/env bash
# Trains the full preset's pending runs of the given variants in the background's one process, one run at a time,
# seeds outermost (so that a partial comparison stays paired), and after each run rebuilds the comparison's report
# from every finished run, and the four controls' page (scripts/controls_report.py), and commits them with the
# finished runs (a run folder counts once its evaluations.csv, written last, is there), so that a stopped machine
# loses at most the run in progress. Stop it with: kill <its pid>, which stops the run in progress too (redone on the
# next start).
#
# --seeds FIRST LAST (default 0 19) limits it to those seeds, so that two queues on two cores can share the plan
# without ever training the same run. --out DIR (default docs/results/full) is the comparison's folder, and what
# follows `--` goes to every compare.py call (a setting of the variants: a folder holds one setting of each). Each
# queue trains with a scratch --out whose runs/ is DIR/runs (so finished runs are seen and skipped, and runs land
# there), so that a training's own report never lands in DIR; the report there is only rebuilt, and committed, under
# a lock that the queues share.
#
#     nohup bash scripts/full_queue.sh relo expected_td > full_queue.log 2>&1 &
#     nohup bash scripts/full_queue.sh --seeds 0 9 relo expected_td > full_queue.log 2>&1 &
#     nohup bash scripts/full_queue.sh --seeds 10 19 relo expected_td > full_queue_2.log 2>&1 &
#     nohup bash scripts/full_queue.sh --out docs/results/full_expected_td_tuned expected_td \
#         -- --regressor-learning-rate 3e-4 > full_queue_3.log 2>&1 &
# The whole script is one { ... } block, which bash reads to its end before it runs any of it: an edit of this file
# cannot change a queue under way.
{
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bash scripts/full_queue.sh [--seeds FIRST LAST] [--out DIR] VARIANT [VARIANT ...] [-- COMPARE OPTION ...]"
usage="${usage} (0 <= FIRST <= LAST <= 19)"
first=0
last=19
results=docs/results/full
while [ "$#" -gt 0 ]; do
    case "$1" in
        --seeds)
            if [ "$#" -lt 3 ]; then
                echo "$usage" >&2
                exit 2
            fi
            first="$2"
            last="$3"
            shift 3
            if ! [[ "$first" =~ ^[0-9]+$ && "$last" =~ ^[0-9]+$ ]] || [ "$first" -gt "$last" ] || [ "$last" -gt 19 ]; then
                echo "--seeds FIRST LAST: got '${first}' '${last}'; ${usage}" >&2
                exit 2
            fi
            ;;
        --out)
            if [ "$#" -lt 2 ] || [ -z "$2" ]; then
                echo "$usage" >&2
                exit 2
            fi
            results="$2"
            shift 2
            ;;
        *) break ;;
    esac
done
variants=()
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
    variants+=("$1")
    shift
done
[ "${1:-}" = "--" ] && shift
options=("$@")
if [ "${#variants[@]}" = 0 ]; then
    echo "$usage" >&2
    exit 2
fi
source scripts/commit_results.sh
source scripts/child_process.sh
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$results/runs"
case "$results" in
    /*) ln -s "$results/runs" "$scratch/runs" ;;
    *) ln -s "$PWD/$results/runs" "$scratch/runs" ;;
esac
# The full preset's own folder is compare.py's default: its report keeps quoting the command without --out
out_option=()
if [ "$results" != docs/results/full ]; then
    out_option=(--out "$results")
fi
shopt -s nullglob
# Rebuild the comparison's report and the controls' page, and commit them with every finished run (message: $1),
# under the lock the queues share
commit_report() {
    (
        flock 9
        .venv/bin/python scripts/compare.py --full --report-only --no-progress-bar "${out_option[@]}" "${options[@]}"
        .venv/bin/python scripts/controls_report.py
        finished=("$results"/runs/*/evaluations.csv)
        commit_results "$1" "${finished[@]%/evaluations.csv}" "$results"/*.md "$results"/*.csv "$results"/*.png \
            docs/results/controls/summary.md
    ) 9> "$(git rev-parse --git-dir)/full_queue.lock"
}
# Whether the report may lack a finished run: at the start, since an earlier start may have been stopped between a
# run's end and its commit; not after a commit
stale=1
for seed in $(seq "$first" "$last"); do
    for variant in "${variants[@]}"; do
        # compare.py checks the run and trains it unless it has finished; one that had its result file before is
        # rebuilt into the report again (a restarted queue walks its finished seeds without a rebuild each)
        result="$results/runs/${variant}_s${seed}/evaluations.csv"
        had_result=0
        [ -f "$result" ] && had_result=1
        code="$(code_version)"
        run_child .venv/bin/python scripts/compare.py --full --variants "$variant" --seeds "$seed" --workers 1 \
            --no-progress-bar --out "$scratch" "${options[@]}"
        if [ "$had_result" = 0 ]; then
            commit_report "Full preset: ${variant} seed ${seed} finished (${results}), report rebuilt; trained by ${code}"
            stale=0
        fi
    done
done
if [ "$stale" = 1 ]; then
    commit_report "Full preset: report rebuilt from the finished runs of ${results}"
fi
echo "full_queue: seeds ${first}-${last} of ${variants[*]} in ${results} have finished"
exit
}
