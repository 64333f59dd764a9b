"""What an install gets: one version, the typing marker and stub, the licence, the base install's progress bar, and the
library and the env under names of their own."""

import importlib.metadata
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import sb3_per

ROOT = Path(__file__).resolve().parents[2]  # tests/sb3_per/ -> the repository root
METADATA = importlib.metadata.metadata("sb3-per")


def test_the_version_is_written_once_and_is_the_installed_one():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject
    assert re.search(r'^version\s*=\s*"', pyproject, flags=re.MULTILINE) is None  # no literal version there
    assert METADATA["Version"] == sb3_per.__version__


def test_the_package_ships_its_typing_marker():
    assert (Path(sb3_per.__file__).parent / "py.typed").is_file()
    assert '"py.typed"' in (ROOT / "pyproject.toml").read_text()


def test_the_licence_file_is_the_declared_one():
    assert METADATA["License-Expression"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_the_base_install_has_what_sb3s_progress_bar_needs():
    required = importlib.metadata.requires("sb3-per") or []
    base = {re.split(r"[<>=;\s\[]", r, maxsplit=1)[0] for r in required if "extra ==" not in r}
    assert {"tqdm", "rich"} <= base


def test_the_wheel_ships_the_library_and_the_env_under_names_of_their_own(tmp_path):
    """No bare `envs` or `comparison` in site-packages: a user's own `envs` package must keep working."""
    build = [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--no-build-isolation", "-q"]
    subprocess.run(
        [*build, "-w", str(tmp_path)],
        check=True,
        timeout=300,
        cwd=tmp_path,
    )
    (wheel,) = tmp_path.glob("sb3_per-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names if ".dist-info/" not in name} == {"sb3_per", "sb3_per_envs"}
    assert "sb3_per_envs/data/pairs_sample.csv" in names
    assert "sb3_per/schemes/per.py" in names and "sb3_per/hyperparams/per_sac.yml" in names
    assert "sb3_per/__init__.pyi" in names  # the constructors' signatures, for type checkers


def test_a_projects_own_envs_package_and_the_installed_env_live_side_by_side(tmp_path):
    own = tmp_path / "envs"
    own.mkdir()
    (own / "__init__.py").write_text("MINE = True\n")
    code = (
        "import gymnasium as gym, envs; assert envs.MINE; "
        "env = gym.make('sb3_per_envs:PairsTrading-v0'); "
        "assert type(env.unwrapped).__module__ == 'sb3_per_envs.pairs_trading'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, cwd=tmp_path)
