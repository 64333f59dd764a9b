"""Sphinx configuration of the sb3-per documentation (Markdown pages through MyST, the API through autodoc)."""

import importlib
import inspect
import re
import sys
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parent.parent
# The repository's root first, so that autodoc documents this checkout's code.
sys.path.insert(0, str(ROOT))

import sb3_per  # noqa: E402

project = "sb3-per"
author = "sb3-per contributors"
copyright = "2026, sb3-per contributors"
version = release = sb3_per.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.mathjax", "sphinx.ext.viewcode"]
source_suffix = {".md": "markdown"}
# docs/results/ holds what the experiment scripts write (summaries, CSVs, figures): the pages show its figures and
# link its files, but its Markdown files are not pages of their own.
exclude_patterns = ["_build", "results", "Thumbs.db", ".DS_Store"]

myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
# Anchors for #, ## and ### headings, so that pages can link to sections: [text](page.md#section-title)
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"show-inheritance": True}

html_theme = "furo"
html_title = f"sb3-per {release}"


class MarkdownDocstring(SphinxDirective):
    """
    ``{markdown-docstring} module.Object``: an object's docstring written in Markdown, as Gymnasium writes its
    environments' (``envs.PairsTradingEnv``), rendered as Markdown in a MyST page. autodoc reads docstrings as
    reStructuredText, which such a docstring is not. Its headings become bold lines (they are not the page's sections).
    """

    required_arguments = 1

    def run(self) -> list[nodes.Node]:
        module_name, _, name = self.arguments[0].rpartition(".")
        docstring = inspect.getdoc(getattr(importlib.import_module(module_name), name)) or ""
        lines = [re.sub(r"^#{1,6} (.+)$", r"**\1**", line) for line in docstring.splitlines()]
        container = nodes.container()
        self.state.nested_parse(StringList(lines, source=self.arguments[0]), self.content_offset, container)
        return container.children


def setup(app):
    app.add_directive("markdown-docstring", MarkdownDocstring)
    return {"parallel_read_safe": True}
