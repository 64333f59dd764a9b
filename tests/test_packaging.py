"""What an install gets: one version, the typing marker, the licence, and the base install's progress bar."""

import importlib.metadata
import re
from pathlib import Path

import sb3_per

ROOT = Path(__file__).resolve().parent.parent
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
