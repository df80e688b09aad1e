import pytest

from terminal import sigint_as_at_a_terminal


@pytest.fixture
def public_data(monkeypatch):
    """The public data files committed in data/public, read with no mirror override
    (a fresh clone has nothing else)."""
    from longctx import data

    monkeypatch.delenv(data.MIRROR_ENV, raising=False)
    missing = [
        f.filename
        for f in data.DATA_FILES.values()
        if not (data.COMMITTED_DIR / f.filename).exists()
    ]
    if missing:
        pytest.fail(f"{data.COMMITTED_DIR} lacks {missing}; they are committed with the project")
    return data.COMMITTED_DIR


@pytest.fixture(scope="session")
def smollm2():
    """The smallest package-shipped model, float32 on CPU (deterministic greedy decoding)."""
    from longctx.backends.hf import load_model

    return load_model("smollm2-135m-instruct", device="cpu", dtype="float32")


@pytest.fixture(scope="session")
def committed_findings():
    """The findings table of the committed rows, computed once for every test that reads it."""
    from longctx.findings import findings_table
    from longctx.paths import repo_root

    return findings_table(repo_root() / "data" / "results")


@pytest.fixture(scope="session")
def committed_matrix():
    """The claims x readers matrix of the committed rows, built once for the tests that read it."""
    from longctx import matrix
    from longctx.paths import repo_root

    return matrix.build(repo_root() / "data" / "results")


@pytest.fixture(autouse=True)
def generated_code_runs_somewhere(monkeypatch):
    """Where bubblewrap cannot isolate generated code, scoring refuses it; tests that score
    HumanEval then accept the Python guards alone (the escape tests are skipped there, and
    CI runs where bubblewrap works: make test installs it)."""
    from longctx.sandbox import UNISOLATED_ENV, isolation_command

    if isolation_command() is None:
        monkeypatch.setenv(UNISOLATED_ENV, "1")


@pytest.fixture
def ctrl_c_reaches_python():
    """For tests that press Ctrl-C: SIGINT handled as at a terminal, whatever the runner's."""
    with sigint_as_at_a_terminal():
        yield
