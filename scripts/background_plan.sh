#!/usr/bin/env bash
# The open issues' runs, in the order the issues need them, as one chain of queues per core: each queue trains what is
# pending of its plan and commits each run as it ends (scripts/full_queue.sh, scripts/study_queue.sh), and a queue
# whose plan is finished ends at once, so the chain resumes where the last machine stopped. Start one chain per core:
#
#     nohup bash scripts/background_plan.sh 0 > background_plan_0.log 2>&1 &
#     nohup bash scripts/background_plan.sh 1 > background_plan_1.log 2>&1 &
#
# The order:
#   chain 0: issue 46's ExpectedReLo full-preset seeds 0-9; its 10 MinAtar confirmation runs (the MinAtar study on
#            Breakout and Seaquest: one queue, as --shard would give one core all 10); issue 47's MuJoCo study, every
#            other run from the first; then the rest of the MinAtar study (noisy Breakout, which no open issue needs);
#   chain 1: ExpectedReLo's full-preset seeds 10-19; ExpectedTD's tuned regressor rate and ReLo's published offset on
#            the pairs env, 20 seeds each (issue 46's equal tuning: on the core that MinAtar's 30 runs leave free);
#            the MuJoCo study, every other run from the second.
# A step whose queue fails is reported and the chain goes on to the next. Stop a chain with: kill <its pid>, which
# stops the queue and the run in progress too (redone, or resumed from its checkpoint, on the next start).
# The whole script is one { ... } block, which bash reads to its end before it runs any of it: an edit of this file
# cannot change a chain under way.
{
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bash scripts/background_plan.sh CHAIN (0 or 1: one chain per core)"
if [ "$#" != 1 ] || ! [[ "$1" =~ ^[01]$ ]]; then
    echo "$usage" >&2
    exit 2
fi
chain="$1"
# One process per chain: a second start would train the first pending run into the same folder (the lock is held
# by the chain and, inherited, by each queue and training it starts)
exec 8> "$(git rev-parse --git-dir)/background_plan_${chain}.lock"
if ! flock -n 8; then
    echo "background_plan ${chain} is already running (its lock is held); stop it first with: kill <its pid>" >&2
    exit 1
fi
source scripts/child_process.sh
step() {
    echo "background_plan ${chain}: $*"
    run_child bash "$@" || echo "background_plan ${chain}: step failed (exit status $?): $*" >&2
}
if [ "$chain" = 0 ]; then
    step scripts/full_queue.sh --seeds 0 9 expected_relo_root
    step scripts/study_queue.sh minatar 1 --seeds 5 --games breakout seaquest
else
    step scripts/full_queue.sh --seeds 10 19 expected_relo_root
    step scripts/full_queue.sh --out docs/results/full_expected_td_tuned expected_td -- --regressor-learning-rate 3e-4
    step scripts/full_queue.sh --out docs/results/full_relo_authors_offset relo -- --relo-epsilon 1e-5
fi
step scripts/study_queue.sh mujoco 1 --seeds 5 --shard "$chain" 2
if [ "$chain" = 0 ]; then
    step scripts/study_queue.sh minatar 1 --seeds 5
fi
echo "background_plan ${chain}: every step has ended"
exit
}
