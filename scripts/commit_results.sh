# Sourced by the background queues: commit_results MESSAGE PATH [PATH ...] commits those paths (only them) with
# MESSAGE. Another git command in the same repository (a developer's commit, another queue) holds git's lock for a
# moment: wait, retry. After 10 failed tries it says so on stderr and returns 0, so that the queue trains on (what
# was left is committed by the next call that names the same paths).
commit_results() {
    if [ "$#" -lt 2 ]; then
        echo "usage: commit_results MESSAGE PATH [PATH ...]" >&2
        return 2
    fi
    local message="$1"
    shift
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        if git add -- "$@" && git commit -q -m "$message" -- "$@" > /dev/null; then
            return 0
        fi
        if git diff --quiet HEAD -- "$@" && [ -z "$(git ls-files --others --exclude-standard -- "$@")" ]; then
            return 0  # nothing to commit
        fi
        sleep 5
    done
    echo "could not commit ${*}: ${message}" >&2
}
