# Sourced by the queue scripts. `run_child COMMAND...` runs a training as a child that a TERM or INT sent to the
# queue stops too: bash runs a trap only once a foreground child has ended, so the child runs in the background and
# the queue waits on it. A signal that arrives while the queue commits is handled once the commit is done.
child_pid=""

stop_child_and_exit() {
    local signal="$1"
    trap - TERM INT
    if [ -n "$child_pid" ]; then
        kill -TERM "$child_pid" 2>/dev/null || true
        wait "$child_pid" 2>/dev/null || true
    fi
    echo "$(basename "$0"): stopped by SIG${signal}; the run in progress is redone on the next start" >&2
    exit $((128 + $(kill -l "$signal")))
}

trap 'stop_child_and_exit TERM' TERM
trap 'stop_child_and_exit INT' INT

run_child() {
    "$@" &
    child_pid=$!
    local status=0
    wait "$child_pid" || status=$?
    child_pid=""
    return "$status"
}
