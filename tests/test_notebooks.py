"""Every notebook has a parameters cell papermill can read in full, and is a page of prose
that calls the library: no functions of its own, no model loading, mostly Markdown."""

import ast
from pathlib import Path

import jupytext
import pytest
from papermill.translators import PythonTranslator

from longctx.chapters import PAGE_PARAMETERS, contracts
from longctx.section import COMMON

# Pages that only read committed rows: no model to choose.
READ_ONLY_PAGES = {"findings", "backends"}
ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.py"))
# The book's pages and the contributors' template, held to the same shape.
PAGES = [*NOTEBOOKS, NOTEBOOKS[0].parent / "templates" / "chapter.py"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_is_fully_parsed_by_papermill(path):
    nb = jupytext.read(path)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{path.name}: expected one cell tagged 'parameters'"
    assigned = [
        t.id
        for node in ast.parse(cells[0].source).body
        if isinstance(node, ast.Assign)
        for t in node.targets
    ]
    # papermill drops a line it cannot parse (e.g. an '=' inside a comment) from --help-notebook
    parsed = [p.name for p in PythonTranslator.inspect(cells[0])]
    assert parsed == assigned
    if path.stem not in READ_ONLY_PAGES:
        # The cell names the reader and the scale; the other page parameters are every
        # chapter page's, named once (PAGE_PARAMETERS), so no page repeats them.
        assert {"model", "scale"} <= set(parsed)
        assert not set(parsed) & (set(PAGE_PARAMETERS) - {"model", "scale"}), parsed


def test_there_are_notebooks():
    assert NOTEBOOKS


def code_cells(path):
    return [c for c in jupytext.read(path).cells if c.cell_type == "code"]


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_notebook_defines_no_functions(path):
    """Analysis lives in the library, where it is tested and shared with the findings page."""
    defined = [
        f"line {node.lineno} of a cell: {type(node).__name__}"
        for cell in code_cells(path)
        for node in ast.walk(ast.parse(cell.source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda)
    ]
    assert not defined, f"{path.name} defines code the library should hold: {defined}"


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_notebook_loads_no_model_itself(path):
    """A notebook answers through longctx.runner; weights and backends stay behind the Reader."""
    heavy = {"torch", "transformers", "llama_cpp", "longctx.backends", "longctx.models"}
    imported = {
        name
        for cell in code_cells(path)
        for node in ast.walk(ast.parse(cell.source))
        for name in (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module]
            if isinstance(node, ast.ImportFrom)
            else []
        )
    }
    assert not {n for n in imported if n.split(".")[0] in heavy or n in heavy}, imported


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_notebook_is_mostly_prose(path):
    """Under 40% of a page's non-blank lines are code, and every code line fits the page."""
    cells = jupytext.read(path).cells
    lines = {
        kind: [
            ln for c in cells if c.cell_type == kind for ln in c.source.splitlines() if ln.strip()
        ]
        for kind in ("code", "markdown")
    }
    share = len(lines["code"]) / (len(lines["code"]) + len(lines["markdown"]))
    assert share < 0.40, f"{path.name}: {share:.0%} of its lines are code"
    too_long = [ln for ln in lines["code"] if len(ln) > 100]
    assert not too_long, f"{path.name}: code lines over 100 characters: {too_long}"


@pytest.mark.parametrize("name", sorted(contracts()))
def test_a_chapter_page_shows_each_section_its_chapter_declares_once(name):
    """A page is prose and ``page.show`` calls: each names a section of its chapter, and no
    section is declared that no page shows."""
    chapter = contracts()[name]
    path = ROOT / chapter.notebook
    shown = [
        node.args[0].value
        for cell in code_cells(path)
        for node in ast.walk(ast.parse(cell.source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "show"
        and getattr(node.func.value, "id", "") == "page"
    ]
    declared = chapter.sections
    assert len(shown) == len(set(shown)), shown
    assert set(declared) <= set(shown) <= set(declared) | set(COMMON), set(shown) ^ set(declared)
