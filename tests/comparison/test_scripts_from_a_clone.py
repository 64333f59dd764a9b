"""The scripts run from a clone whatever installed the library: ``pip install -e ".[experiments]"`` puts only
``sb3_per`` and ``sb3_per_envs`` on the path, so each script that imports ``comparison`` or ``envs`` first imports
``scripts/_repository.py``, which puts the clone's root there."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "scripts"
EXPERIMENT_IMPORT = re.compile(r"^\s*(from|import) (comparison|envs)\b", re.MULTILINE)
REPOSITORY_IMPORT = re.compile(r"^import _repository\b", re.MULTILINE)


def experiment_scripts() -> list[Path]:
    return sorted(path for path in SCRIPTS.glob("*.py") if EXPERIMENT_IMPORT.search(path.read_text()))


@pytest.mark.parametrize("script", experiment_scripts(), ids=lambda path: path.name)
def test_a_script_puts_the_clone_on_the_path_before_it_imports_the_experiment(script):
    text = script.read_text()
    repository = REPOSITORY_IMPORT.search(text)
    assert repository is not None, f"{script.name} does not import _repository"
    assert repository.start() < EXPERIMENT_IMPORT.search(text).start()


def test_compare_runs_without_the_clone_on_the_path(tmp_path):
    # As after `pip install -e ".[experiments]"`: the clone's root is not on sys.path (setup_env.sh's .pth removed,
    # the working directory elsewhere); python puts the script's folder first, as `python scripts/compare.py` does.
    code = (
        "import os, runpy, sys\n"
        f"root = {str(ROOT)!r}\n"
        "sys.path[:] = [p for p in sys.path if os.path.realpath(p or '.') != root]\n"
        f"sys.path.insert(0, {str(SCRIPTS)!r})\n"
        "sys.argv = ['compare.py', '--help']\n"
        f"runpy.run_path({str(SCRIPTS / 'compare.py')!r}, run_name='__main__')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ""},
    )
    assert result.returncode == 0, result.stderr
    assert "usage: compare.py" in result.stdout
