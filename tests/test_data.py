import hashlib

import pytest

from longctx import data
from longctx.errors import DataFileError


@pytest.fixture
def fake_registry(monkeypatch, tmp_path):
    payload = b"hello longctx\n"
    spec = data.DataFile("fake", "fake.txt", "http://127.0.0.1:9/fake.txt", hashlib.sha256(payload).hexdigest(), "x")
    monkeypatch.setitem(data.DATA_FILES, "fake", spec)
    monkeypatch.setenv(data.CACHE_ENV, str(tmp_path / "cache"))
    return payload, tmp_path


def test_fetch_reads_verified_mirror(fake_registry, monkeypatch):
    payload, tmp = fake_registry
    (tmp / "mirror").mkdir()
    (tmp / "mirror" / "fake.txt").write_bytes(payload)
    monkeypatch.setenv(data.MIRROR_ENV, str(tmp / "mirror"))
    assert data.fetch("fake").read_bytes() == payload


def test_fetch_rejects_corrupt_file(fake_registry, monkeypatch):
    _, tmp = fake_registry
    (tmp / "mirror").mkdir()
    (tmp / "mirror" / "fake.txt").write_bytes(b"tampered")
    monkeypatch.setenv(data.MIRROR_ENV, str(tmp / "mirror"))
    with pytest.raises(DataFileError, match="corrupt"):
        data.fetch("fake")


def test_fetch_missing_offline_names_the_source(fake_registry, monkeypatch):
    monkeypatch.delenv(data.MIRROR_ENV, raising=False)
    with pytest.raises(DataFileError, match="http://127.0.0.1:9/fake.txt"):
        data.fetch("fake", download=False)
    with pytest.raises(DataFileError, match="could not download"):
        data.fetch("fake")  # nothing listens on port 9
    assert not list((fake_registry[1] / "cache").rglob("*.part"))


def test_fetch_unknown_name():
    with pytest.raises(DataFileError, match="unknown data file 'nope'"):
        data.fetch("nope")


def test_registered_mirror_files_verify(data_mirror):
    for name in data.DATA_FILES:
        assert data.fetch(name, download=False).name == data.DATA_FILES[name].filename
