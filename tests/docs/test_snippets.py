"""
Every Python snippet of the README and of the documentation runs: no example can rot.

Each Markdown file's ```` ```python ```` fences are run in order in one namespace (a page's snippets build on one
another), in a temporary working directory, one test per file. Code meant only to be shown (a 100k-step run, a shell
command) uses another fence: ```` ```{code-block} python ````, ```` ```console ````, ```` ```text ````. A page whose
snippets train for more than a few seconds says so with the line ``<!-- snippet-test: slow -->``, which marks its test
slow. The last test builds the site with Sphinx, warnings as errors, as CI does.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SLOW_MARK = "<!-- snippet-test: slow -->"
# An opening fence of three or more backticks (or tildes), its info string, and the lines up to the closing fence
FENCE = re.compile(
    r"^(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL
)


def markdown_files() -> list[Path]:
    """The README and every Markdown file under docs/, but the build output."""
    pages = sorted(path for path in DOCS.rglob("*.md") if "_build" not in path.relative_to(DOCS).parts)
    return [ROOT / "README.md", *pages]


def python_snippets(text: str) -> list[tuple[int, str]]:
    """The ```python fences of a Markdown text, in order, each with the line its code starts on."""
    return [
        (text.count("\n", 0, match.start("body")) + 1, match.group("body"))
        for match in FENCE.finditer(text)
        if match.group("info").strip() == "python"
    ]


def files_with_snippets() -> list:
    params = []
    for path in markdown_files():
        text = path.read_text(encoding="utf-8")
        if python_snippets(text):
            marks = [pytest.mark.slow] if SLOW_MARK in text else []
            params.append(pytest.param(path, marks=marks, id=str(path.relative_to(ROOT))))
    return params


def test_the_collector_finds_python_fences_and_only_those():
    text = (
        "a\n```python\nx = 1\n```\n```console\n$ ls\n```\n````python\ny = '```'\n````\n```{code-block} python\nz\n```\n"
    )
    assert python_snippets(text) == [(3, "x = 1\n"), (9, "y = '```'\n")]


def test_the_readme_and_the_guide_have_snippets_to_run():
    ids = {param.id for param in files_with_snippets()}
    assert {"README.md", "docs/guide/quickstart.md", "docs/guide/buffer.md"} <= ids


@pytest.mark.parametrize("path", files_with_snippets())
def test_every_python_snippet_of_the_page_runs(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)  # snippets that save files write them here
    namespace: dict = {"__name__": "__snippet__"}
    for line, code in python_snippets(path.read_text(encoding="utf-8")):
        try:
            exec(compile(code, f"{path}:{line}", "exec"), namespace)
        except Exception as error:
            raise AssertionError(f"the snippet at {path.relative_to(ROOT)}, line {line}, failed: {error!r}") from error


@pytest.mark.slow
def test_the_documentation_builds_with_warnings_as_errors(tmp_path: Path):
    if importlib.util.find_spec("sphinx") is None:
        pytest.fail("Sphinx is missing: install the docs extra (pip install -e '.[docs]')")
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(tmp_path / "html")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr[-5000:]
    assert (tmp_path / "html" / "index.html").is_file()
