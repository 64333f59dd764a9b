#!/usr/bin/env bash
# Runs a study (scripts/NAME_study.py) to the end in the background, BATCH runs at a time. After each batch it
# rebuilds the report from every finished run (the MinAtar study's queue also issue 46's controls page,
# scripts/controls_report.py) and commits it with the finished run folders (what the study's
# `finished` action lists: a run counts once its result file, written last, is complete), under a lock that the
# queues of the study share, so that a stopped machine loses at most the runs in progress. Stop it with:
# kill <its pid>, which stops the training in progress too (redone, or resumed from its checkpoint, on the next
# start). The options after BATCH go to the study's script, each call the same (--seeds, --out, --shard, --workers,
# the study's own). A run that fails stops the queue, once the batch's finished runs are committed. On a machine with
# two free cores, two queues share the plan, each with its own --shard, and never train the same run; or one queue
# trains two runs at once with --workers 2 (BATCH at least --workers, or workers idle):
#
#     nohup bash scripts/study_queue.sh minatar 1 > minatar_queue.log 2>&1 &
#     nohup bash scripts/study_queue.sh mujoco 1 --seeds 5 --shard 0 2 > mujoco_queue_0.log 2>&1 &
#     nohup bash scripts/study_queue.sh mujoco 1 --seeds 5 --shard 1 2 > mujoco_queue_1.log 2>&1 &
#     nohup bash scripts/study_queue.sh her 2 --seeds 5 --workers 2 > her_queue.log 2>&1 &
# The whole script is one { ... } block, which bash reads to its end before it runs any of it: an edit of this file
# cannot change a queue under way.
{
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bash scripts/study_queue.sh NAME BATCH [OPTION ...] (NAME: scripts/NAME_study.py; BATCH >= 1)"
if [ "$#" -lt 2 ]; then
    echo "$usage" >&2
    exit 2
fi
name="$1"
batch="$2"
shift 2
script="scripts/${name}_study.py"
if [ ! -f "$script" ]; then
    echo "NAME: no $script; $usage" >&2
    exit 2
fi
if ! [[ "$batch" =~ ^[1-9][0-9]*$ ]]; then
    echo "BATCH must be an integer >= 1, got '${batch}'; $usage" >&2
    exit 2
fi
source scripts/commit_results.sh
source scripts/child_process.sh
shopt -s nullglob
# Rebuild the report and commit it (its main file, CSVs and plots) with every finished run's folder (message: $1),
# under the study's lock
commit_finished() {
    local summary="$1"
    shift
    (
        flock 9
        report="$(.venv/bin/python "$script" report "$@" | sed -n 's/^report: //p')"
        if [ -z "$report" ]; then
            echo "study_queue: ${script} report named no report file; nothing committed" >&2
            exit 1
        fi
        out="$(dirname "$report")"
        listed="$(.venv/bin/python "$script" finished "$@")"
        finished=()
        if [ -n "$listed" ]; then
            mapfile -t finished <<< "$listed"
        fi
        paths=("${finished[@]}" "$report" "$out"/*.csv "$out"/*.png)  # not a hand-written page beside the report
        # The MinAtar study feeds issue 46's controls page, which the full preset's queue rebuilds too
        if [ "$name" = minatar ]; then
            .venv/bin/python scripts/controls_report.py
            paths+=(docs/results/controls/summary.md)
        fi
        commit_results "${name} study: ${summary}" "${paths[@]}"
    ) 9> "$(git rev-parse --git-dir)/${name}_queue.lock"
}

# A start that finds nothing pending commits what an earlier one finished, in case that one was stopped between a
# run's end and its commit
if [ "$(.venv/bin/python "$script" pending "$@")" = 0 ]; then
    commit_finished "finished runs and report (0 runs pending in this queue)" "$@"
fi
while [ "$(.venv/bin/python "$script" pending "$@")" != 0 ]; do
    status=0
    code="$(code_version)"
    run_child .venv/bin/python "$script" run --max-runs "$batch" "$@" || status=$?
    left="$(.venv/bin/python "$script" pending "$@")"
    commit_finished "finished runs and report (${left} runs pending in this queue); trained by ${code}" "$@"
    if [ "$status" != 0 ]; then
        echo "study_queue: a run of this ${name} queue failed (exit status ${status}); the finished ones are committed" >&2
        exit "$status"
    fi
done
echo "study_queue: every run of this ${name} queue has finished"
exit
}
