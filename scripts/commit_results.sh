# Sourced by the background queues: commit_results MESSAGE PATH [PATH ...] commits those paths (only them) with
# MESSAGE. Another git command in the same repository (a developer's commit, another queue) holds git's lock for a
# moment: wait, retry. A git command killed mid-way (a session that ends during a commit) leaves its lock behind,
# which would fail every later commit: one older than a minute, with no git command running, is removed. After 10
# failed tries it says so on stderr and returns 0, so that the queue trains on (what was left is committed by the
# next call that names the same paths).
commit_results() {
    if [ "$#" -lt 2 ]; then
        echo "usage: commit_results MESSAGE PATH [PATH ...]" >&2
        return 2
    fi
    local message="$1"
    shift
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        remove_stale_git_locks
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

# The lock files of git's own (not the queues' flock files, which live beside them) that are over a minute old, removed
# when no git command is running: what a git command killed mid-way leaves.
remove_stale_git_locks() {
    if ! command -v pgrep > /dev/null || pgrep -x git > /dev/null; then
        return 0
    fi
    local git_dir
    git_dir="$(git rev-parse --git-dir)"
    find "$git_dir" -maxdepth 1 \( -name index.lock -o -name 'next-index-*.lock' -o -name HEAD.lock \
        -o -name ORIG_HEAD.lock -o -name packed-refs.lock \) -mmin +1 -delete 2> /dev/null || true
    find "$git_dir/refs" -name '*.lock' -mmin +1 -delete 2> /dev/null || true
}

# The code that a training started now runs: the commit, with "+uncommitted" where the package, the env, the
# experiment or the scripts differ from it (named in the queues' commit messages, since a run folder does not say).
code_version() {
    local version
    version="$(git rev-parse --short HEAD)"
    if [ -n "$(git status --porcelain --untracked-files=no -- sb3_per envs comparison scripts)" ]; then
        version="${version}+uncommitted"
    fi
    echo "$version"
}
