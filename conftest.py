"""Prepare the chapter notebooks for nbval at CI scale.

nbval does not read jupytext ``.py`` files, so before collection every
``notebooks/*.py`` is converted to ``tests/_nb/<name>.ipynb`` with papermill's
``prepare_only`` injecting the small parameters below (smallest model, a few
prompts, results written under ``tests/_nb/results`` so committed results stay
untouched). ``pytest --nbval-lax`` then executes each notebook cell by cell.

Under pytest-xdist (``make test`` runs ``-n logical --dist loadfile``) the controller
stages the notebooks once, each file goes whole to one worker (a notebook's cells run in
order, in one kernel), and each worker is pinned to its own CPU: torch and llama.cpp size
their thread pools from it, so two workers never fight over one core.
"""

import os
from pathlib import Path

ROOT = Path(__file__).parent
NB_DIR = ROOT / "tests" / "_nb"

# Each chapter runs at its ``ci`` scale (lib/longctx/scales/<chapter>.json) with the smallest
# model, its rows written under tests/_nb/results so committed results stay untouched.
RUN_PARAMETERS = {
    "scale": "ci",
    "model": "smollm2-135m-instruct",
    "batch_size": 8,
    "results_dir": str(NB_DIR / "results"),
}
READ_ONLY_PAGES = {"findings", "backends"}  # they read the committed rows; nothing is generated
# CI checks that every page runs, not what the smoke model answers: each answer is cut at this
# many tokens (a chapter's budgets reach 1,024 tokens, which the smoke model fills rambling).
CI_GENERATION_CAP = 16


def ci_parameters(notebook: str) -> dict:
    """What CI injects into ``notebooks/<notebook>.py``: the chapter's ``ci`` scale and the
    run's parameters."""
    return {} if notebook in READ_ONLY_PAGES else dict(RUN_PARAMETERS)


def pytest_configure(config):
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        pin_to_one_cpu(int(worker["workerid"].removeprefix("gw")))
        return  # the controller staged the notebooks before starting its workers
    if not config.getoption("nbval_lax", default=False) and not config.getoption(
        "nbval", default=False
    ):
        return
    import jupytext
    import papermill

    from longctx.cli import quiet_page_parameters

    quiet_page_parameters()  # the page parameters CI injects, as longctx run does
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


def pin_to_one_cpu(index: int) -> None:
    """Run this xdist worker (and the kernels and subprocesses it starts) on one CPU of those
    the run may use, worker ``index`` on the ``index``-th modulo their number."""
    if not hasattr(os, "sched_setaffinity"):  # macOS: the workers share the cores
        return
    cpus = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpus[index % len(cpus)]})
