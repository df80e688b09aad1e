"""The parallel pre-execution of the book's notebooks: what it runs and that the build's
cache lookup (MyST-NB's, on the page as jupytext reads it) finds what it stored."""

import sys
from pathlib import Path

# Imported by name, as the script's worker processes find their function by it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import execute_book  # noqa: E402


def test_every_notebook_page_of_the_toc_is_run_and_nothing_else():
    root = execute_book.ROOT
    pages = execute_book.toc_notebooks(root)
    toc = (root / "_toc.yml").read_text()
    assert pages and all(p.suffix == ".py" and p.parent.name == "notebooks" for p in pages)
    assert {p.stem for p in pages} == {
        p.stem for p in (root / "notebooks").glob("*.py") if f"notebooks/{p.stem}" in toc
    }


def test_a_notebook_executed_here_is_what_the_build_finds_in_its_cache(tmp_path):
    from jupyter_cache import get_cache

    page = tmp_path / "page.py"
    page.write_text("# %% [markdown]\n# A page.\n\n# %%\nprint(6 * 7)\n")
    cache = tmp_path / "cache"
    assert execute_book.main(["--cache", str(cache), "--jobs", "1"], pages=[page]) == 0
    record = get_cache(str(cache)).match_cache_notebook(execute_book.read(page))
    _, executed = get_cache(str(cache)).merge_match_into_notebook(execute_book.read(page))
    assert record is not None and executed.cells[1].outputs[0]["text"] == "42\n"
    assert execute_book.main(["--cache", str(cache)], pages=[page]) == 0  # nothing left to run


def test_a_kernel_that_does_not_start_leaves_the_page_to_the_build(tmp_path, monkeypatch, capsys):
    from jupyter_cache import get_cache
    from jupyter_cache.executors import utils

    def no_kernel(*args, **kwargs):
        raise RuntimeError("Kernel didn't respond in 60 seconds")

    # The workers are forked, so they inherit the patched executor.
    monkeypatch.setattr(utils, "single_nb_execution", no_kernel)
    page = tmp_path / "page.py"
    page.write_text("# %%\nprint(1)\n")
    cache = tmp_path / "cache"
    assert execute_book.main(["--cache", str(cache), "--jobs", "2"], pages=[page]) == 0
    assert "failed (RuntimeError: Kernel didn't respond in 60 seconds); the build reruns it" in (
        capsys.readouterr().out
    )
    assert not get_cache(str(cache)).list_cache_records()
