import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


@pytest.fixture
def data_mirror(monkeypatch):
    """The public data mirror: $LONGCTX_DATA_MIRROR, else ../shared/data beside the checkout."""
    mirror = os.environ.get("LONGCTX_DATA_MIRROR") or str(SHARED_DATA)
    if not Path(mirror).is_dir():
        pytest.fail(f"data mirror {mirror} not found; set LONGCTX_DATA_MIRROR to a folder with the mirrored files")
    monkeypatch.setenv("LONGCTX_DATA_MIRROR", mirror)
    return Path(mirror)


@pytest.fixture(scope="session")
def smollm2():
    """The smallest package-shipped model, float32 on CPU (deterministic greedy decoding)."""
    from longctx.models import load_model

    return load_model("smollm2-135m-instruct", device="cpu", dtype="float32")
