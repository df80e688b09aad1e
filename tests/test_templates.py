"""The contributor templates stay true: the chapter module runs on committed rows, and the
notebook calls only what the module defines."""

import ast
import importlib.util
import sys
from pathlib import Path

import jupytext

from longctx.chapters.contract import ChapterResult, Run
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


def template_chapter(module, params: dict):
    """The template's chapter with ``params`` as its book scale (a copied chapter reads its
    scales file; the template has none)."""

    class Template(module.TemplateChapter):
        def scales(self) -> dict:
            return {"book": params}

    return Template()


def test_the_chapter_template_runs_on_committed_rows():
    module = load_module()
    params = {"num_pairs": 10, "examples": 8, "seed": 0}
    results = repo_root() / "data" / "results"
    run = Run.of(template_chapter(module, params), Reader(), "book", results)
    plan = run.planned()
    rows = stored(plan, Reader(), results)
    assert len(rows) == len(all_requests(plan)) == 16  # every prompt already answered
    view = run.chapter.analyze(run)
    middle = view.estimates["template-middle"]
    assert isinstance(view, ChapterResult) and isinstance(middle, Estimate) and middle.n == 8
    assert set(view.quoted) == {"template-examples", "template-middle"}
    assert view.consistent and set(module.accuracy_table(view)["depth"]) == {0.0, 0.5}
    assert module.figure(view).axes
    text = module.figure_text(view)
    assert "8 examples per point" in text.caption and "depth 0.5:" in text.alt


def test_the_chapter_template_meets_the_chapter_contract():
    from longctx.chapters import register

    declared = register({}, load_module().TemplateChapter)
    assert declared.experiments == () and declared.claim_blocks


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


NEW_CHAPTER_SCRIPT = """
import subprocess, sys
from longctx.chapters import contracts
from longctx.claims import read_claims
from longctx.findings import findings_table
assert "probe" in contracts(), sorted(contracts())
claims = [c for c in read_claims() if c.chapter == "probe"]
table = findings_table("data/results", claims)
assert list(table["id"]) == ["probe-middle"] and table["n"].iloc[0] == 8, table
rc = subprocess.run([sys.executable, "-m", "longctx.cli", "reproduce", "--chapters", "probe",
                     "--scale", "book", "--dry-run"], capture_output=True, text=True)
assert rc.returncode == 0 and "0 missing" in rc.stdout, rc.stdout + rc.stderr
print("ok")
"""


def test_a_new_chapter_from_the_templates_touches_five_files(tmp_path):
    """A contributor's path, followed in a copy of the repository: the two templates copied
    (module and page), a scale file, one line of ``_toc.yml`` and the claim's row in
    ``claims.csv``. Nothing else is edited,
    and the chapter is then found, its claim judged, and its book scale planned (every row
    already stored: the template runs on the key-value chapter's committed rows)."""
    import hashlib
    import json
    import os
    import shutil
    import subprocess

    root = repo_root()
    tree = tmp_path / "repo"
    for part in ("lib", "notebooks", "data/paper"):
        shutil.copytree(root / part, tree / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(root / "_toc.yml", tree / "_toc.yml")
    (tree / "data" / "results").symlink_to(root / "data" / "results")
    (tree / "data" / "public").symlink_to(root / "data" / "public")

    def digests() -> dict[str, str]:
        return {
            str(p.relative_to(tree)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in tree.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and "results" not in p.parts
        }

    before = digests()
    module = (TEMPLATES / "chapter_module.py").read_text()
    module = module.replace('NAME = "template"', 'NAME = "probe"').replace("<name>", "probe")
    (tree / "lib/longctx/chapters/probe.py").write_text(module)
    page = (TEMPLATES / "chapter.py").read_text().replace("<name>", "probe")
    (tree / "notebooks/probe.py").write_text(page)
    sizes = {"num_pairs": 10, "examples": 8, "seed": 0}
    scales = {"book": sizes, **{s: {"extends": "book"} for s in ("claims", "paper", "ci", "smoke")}}
    (tree / "lib/longctx/scales/probe.json").write_text(json.dumps(scales))
    with open(tree / "_toc.yml", "a") as toc:
        toc.write("      - file: notebooks/probe\n")
    with open(tree / "data/paper/claims.csv", "a") as claims:
        claims.write(
            "probe-middle,Lost in the Middle,probe,probe-headline,The middle is read worse.,"
            "middle minus first (pts),worst case in the middle,-1,,10 pairs,probe,directional,"
            ",,,points,kv_retrieval,,\n"
        )

    after = digests()
    touched = {path for path in after if before.get(path) != after[path]}
    assert touched == {
        "lib/longctx/chapters/probe.py",
        "lib/longctx/scales/probe.json",
        "notebooks/probe.py",
        "_toc.yml",
        "data/paper/claims.csv",
    }
    env = {**os.environ, "PYTHONPATH": str(tree / "lib")}
    done = subprocess.run(
        [sys.executable, "-c", NEW_CHAPTER_SCRIPT],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stdout + done.stderr
