#!/usr/bin/env bash
# Creates .venv (once), installs sb3-per with the extras given as $1 (default: experiments), and puts the clone on its path.
# torch==2.13.0 is installed first when the venv has no torch: on these machines that pin is a CPU
# wheel on local disk, while an unpinned torch would pull a multi-GB CUDA build.
# Each step that has work to do says so in one line; a run with nothing to do prints nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-experiments}"
say() { echo "setup_env: $*" >&2; }

if [ ! -x .venv/bin/python ]; then
    say "creating .venv"
    python3 -m venv .venv
fi
if ! .venv/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"; then
    say "installing torch==2.13.0 (the CPU wheel on the project's machines; about a minute)"
    .venv/bin/python -m pip install -q torch==2.13.0
fi
# pip resolves even when everything is installed (seconds); a stamp of pyproject.toml per extra skips it.
stamp=".venv/.sb3-per-${extras}.installed"
wanted="$(cksum < pyproject.toml)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$wanted" ]; then
    say "installing sb3-per[${extras}] (editable) and its dependencies"
    .venv/bin/python -m pip install -q -e ".[${extras}]"
    echo "$wanted" > "$stamp"
fi
# The experiment's packages (comparison/, and envs/ under its repository name) are not installed, only sb3_per and
# the env as sb3_per_envs: the clone's root goes on the venv's path, for the scripts and the tests.
site_packages="$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")"
echo "$PWD" > "$site_packages/sb3_per_repository.pth"
