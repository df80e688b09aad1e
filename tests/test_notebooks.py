"""Every chapter notebook has a parameters cell that papermill can read in full."""

import ast
from pathlib import Path

import jupytext
import pytest
from papermill.translators import PythonTranslator

READ_ONLY_PAGES = {"findings", "backends"}  # pages that only read committed rows: no model to choose
NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.py"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_is_fully_parsed_by_papermill(path):
    nb = jupytext.read(path)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{path.name}: expected one cell tagged 'parameters'"
    assigned = [t.id for node in ast.parse(cells[0].source).body if isinstance(node, ast.Assign)
                for t in node.targets]
    # papermill drops a line it cannot parse (e.g. an '=' inside a comment) from --help-notebook
    parsed = [p.name for p in PythonTranslator.inspect(cells[0])]
    assert parsed == assigned
    if path.stem not in READ_ONLY_PAGES:
        assert {"model", "seed", "device", "batch_size", "results_dir", "backend", "backend_url"} <= set(parsed)


def test_there_are_notebooks():
    assert NOTEBOOKS
