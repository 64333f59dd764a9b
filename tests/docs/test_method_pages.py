"""
Each replay scheme has one home for its description: its page under docs/methods/.

A scheme's class docstring is short: what the scheme does, the buffer settings it gives, its deviations named, and a
link to its page (``docs/methods/<name>.md``), which explains them in a section whose heading starts with
"Deviations" and renders the class's docstring. The schemes are found, not listed: every ``ReplayScheme`` that
``sb3_per`` exports.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import sb3_per
from sb3_per.schemes import ReplayScheme

ROOT = Path(__file__).resolve().parents[2]
METHODS = ROOT / "docs" / "methods"
PAGE_LINK = re.compile(r"``(docs/methods/[\w-]+\.md)``")
DEVIATIONS_HEADING = re.compile(r"^## Deviations\b.*$", re.MULTILINE)


def exported_schemes() -> list[type[ReplayScheme]]:
    """Every replay scheme class that ``sb3_per`` exports, but the abstract base."""
    classes = (getattr(sb3_per, name) for name in sb3_per.__all__)
    return [c for c in classes if inspect.isclass(c) and issubclass(c, ReplayScheme) and c is not ReplayScheme]


def page_of(scheme: type[ReplayScheme]) -> Path:
    """The docs/methods page that the scheme's docstring links (exactly one)."""
    links = PAGE_LINK.findall(inspect.getdoc(scheme) or "")
    assert len(links) == 1, f"{scheme.__name__}'s docstring links {links or 'no'} docs/methods page(s), not one"
    return ROOT / links[0]


def section(text: str, heading: re.Match) -> str:
    """A Markdown page's text from after ``heading`` to the next heading of level 2 or 1 (or the end)."""
    rest = text[heading.end() :]
    following = re.search(r"^#{1,2} ", rest, re.MULTILINE)
    return rest[: following.start()] if following else rest


def test_the_schemes_are_found():
    names = {scheme.__name__ for scheme in exported_schemes()}
    assert {"PER", "LAP", "PAL", "LA3P", "ReLo", "UPER", "ExpectedTD", "ExpectedReLo"} <= names


@pytest.mark.parametrize("scheme", exported_schemes(), ids=lambda scheme: scheme.__name__)
def test_the_docstring_links_a_page_that_explains_the_deviations(scheme: type[ReplayScheme]):
    page = page_of(scheme)
    assert page.is_file(), f"{scheme.__name__}'s docstring links {page.relative_to(ROOT)}, which does not exist"
    text = page.read_text(encoding="utf-8")
    assert text.startswith(f"# {scheme.__name__}"), f"{page.name} is not {scheme.__name__}'s page"
    headings = list(DEVIATIONS_HEADING.finditer(text))
    assert len(headings) == 1, f"{page.name} has {len(headings)} '## Deviations ...' sections, not one"
    assert section(text, headings[0]).strip(), f"{page.name}'s deviations section is empty"
    assert f".. autoclass:: sb3_per.{scheme.__name__}" in text, f"{page.name} does not render the class's docstring"


@pytest.mark.parametrize("scheme", exported_schemes(), ids=lambda scheme: scheme.__name__)
def test_the_docstring_names_the_deviations_and_the_buffer_settings(scheme: type[ReplayScheme]):
    docstring = inspect.getdoc(scheme) or ""
    assert re.search(r"^Deviations\b", docstring, re.MULTILINE), f"{scheme.__name__}'s docstring names no deviations"
    settings = scheme().buffer_settings(sb3_per.SAC)
    said = "Buffer settings" in docstring if settings else "no buffer setting" in docstring
    assert said, f"{scheme.__name__}'s docstring does not say which buffer settings it gives ({settings or 'none'})"


def test_every_method_page_is_a_scheme_s_home():
    homes = {page_of(scheme).name for scheme in exported_schemes()}
    assert homes == {page.name for page in METHODS.glob("*.md")}
