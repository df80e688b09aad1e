"""The contributor templates stay true: the chapter module runs on committed rows, and the
notebook calls only what the module defines."""

import ast
import importlib.util
import sys
from pathlib import Path

import jupytext

from longctx.chapters.contract import ChapterResult, RunContext
from longctx.claims import Estimate
from longctx.paths import repo_root
from longctx.reader import Reader
from longctx.runner import all_requests, stored

TEMPLATES = Path(__file__).resolve().parents[1] / "notebooks" / "templates"


def load_module():
    spec = importlib.util.spec_from_file_location(
        "chapter_template", TEMPLATES / "chapter_module.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_chapter_template_runs_on_committed_rows():
    chapter = load_module()
    params = {"num_pairs": 10, "examples": 8, "seed": 0}
    plan = chapter.plan(params)
    results = repo_root() / "data" / "results"
    rows = stored(plan, Reader(), results)
    assert len(rows) == len(all_requests(plan)) == 16  # every prompt already answered
    view = chapter.analyze(RunContext(Reader(), params, results))
    middle = view.estimates["template-middle"]
    assert isinstance(view, ChapterResult) and isinstance(middle, Estimate) and middle.n == 8
    assert set(view.quoted) == {"template-examples", "template-middle"}
    assert view.consistent and set(chapter.accuracy_table(view)["depth"]) == {0.0, 0.5}
    assert chapter.figure(view).axes


def test_the_chapter_template_meets_the_chapter_contract():
    from longctx.chapters import Chapter

    declared = Chapter.of("template", load_module())
    assert declared.experiments == ("kv_retrieval",) and declared.claim_blocks


def test_the_notebook_template_calls_only_what_the_module_defines():
    module = load_module()
    nb = jupytext.read(TEMPLATES / "chapter.py")
    called = {
        node.attr
        for cell in nb.cells
        if cell.cell_type == "code"
        for node in ast.walk(ast.parse(cell.source))
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "chapter"
    }
    assert called and all(callable(getattr(module, name, None)) for name in called), called
    quoted = {"template-examples", "template-middle"}
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert all(f"`{key}`" in markdown for key in quoted)
