"""Prepare the chapter notebooks for nbval at CI scale.

nbval does not read jupytext ``.py`` files, so before collection every
``notebooks/*.py`` is converted to ``tests/_nb/<name>.ipynb`` with papermill's
``prepare_only`` injecting the small parameters below (smallest model, a few
prompts, results written under ``tests/_nb/results`` so committed results stay
untouched). ``pytest --nbval-lax`` then executes each notebook cell by cell.
"""

from pathlib import Path

from longctx.chapters import scale

ROOT = Path(__file__).parent
NB_DIR = ROOT / "tests" / "_nb"

# Each chapter runs at its ``ci`` scale (lib/longctx/scales/<chapter>.json) with the smallest
# model, its rows written under tests/_nb/results so committed results stay untouched.
RUN_PARAMETERS = {
    "model": "smollm2-135m-instruct",
    "batch_size": 8,
    "results_dir": str(NB_DIR / "results"),
}
READ_ONLY_PAGES = {"findings", "backends"}  # they read the committed rows; nothing is generated
# CI checks that every page runs, not what the smoke model answers: each answer is cut at this
# many tokens (a chapter's budgets reach 1,024 tokens, which the smoke model fills rambling).
CI_GENERATION_CAP = 16


def ci_parameters(notebook: str) -> dict:
    """What CI injects into ``notebooks/<notebook>.py``: the chapter's ``ci`` scale and the run's parameters."""
    if notebook in READ_ONLY_PAGES:
        return {}
    return {**scale(notebook, "ci"), **RUN_PARAMETERS}


def pytest_configure(config):
    if not config.getoption("nbval_lax", default=False) and not config.getoption(
        "nbval", default=False
    ):
        return
    import jupytext
    import papermill

    NB_DIR.mkdir(parents=True, exist_ok=True)
    for source in sorted((ROOT / "notebooks").glob("*.py")):
        params = ci_parameters(source.stem)
        staged = NB_DIR / f"{source.stem}.source.ipynb"
        nb = jupytext.read(source)
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        jupytext.write(nb, staged, fmt="ipynb")
        papermill.execute_notebook(
            str(staged),
            str(NB_DIR / f"{source.stem}.ipynb"),
            parameters=params,
            prepare_only=True,
            kernel_name="python3",
        )
        staged.unlink()
        if source.stem not in READ_ONLY_PAGES:
            cap_generation_in(NB_DIR / f"{source.stem}.ipynb")


def cap_generation_in(path: Path) -> None:
    """Add a cell after the injected parameters that caps every answer's length (the rows
    then have their own keys, under tests/_nb/results)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    at = next(
        i for i, c in enumerate(nb.cells) if "injected-parameters" in c.metadata.get("tags", [])
    )
    cell = nbformat.v4.new_code_cell(
        f"from longctx.requests import cap_generation\n\ncap_generation({CI_GENERATION_CAP})"
    )
    nb.cells.insert(at + 1, cell)
    nbformat.write(nb, path)
