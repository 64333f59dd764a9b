# Sourced by the background queues: commit_results PATH MESSAGE commits PATH (only PATH) with MESSAGE. Another git
# command in the same repository (a developer's commit, the other queue) holds git's lock for a moment: wait, retry.
# After 10 failed tries it says so on stderr and returns 0, so that the queue trains on (the next commit takes both).
commit_results() {
    local path="$1" message="$2"
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        if git add -- "$path" && git commit -q -m "$message" -- "$path"; then
            return 0
        fi
        if git diff --quiet HEAD -- "$path" && [ -z "$(git ls-files --others --exclude-standard -- "$path")" ]; then
            return 0  # nothing to commit
        fi
        sleep 5
    done
    echo "could not commit ${path}: ${message}" >&2
}
