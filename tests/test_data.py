import hashlib

import pytest

from longctx import data
from longctx.errors import DataFileError


@pytest.fixture
def fake_registry(monkeypatch, tmp_path):
    payload = b"hello longctx\n"
    spec = data.DataFile(
        "fake", "fake.txt", "http://127.0.0.1:9/fake.txt", hashlib.sha256(payload).hexdigest(), "x"
    )
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


def test_registered_files_verify(public_data):
    for name in data.DATA_FILES:
        assert data.fetch(name, download=False).name == data.DATA_FILES[name].filename


def test_committed_copy_is_read_without_mirror(public_data, monkeypatch, tmp_path):
    monkeypatch.setenv(data.CACHE_ENV, str(tmp_path / "empty-cache"))
    path = data.fetch("gsm8k-test", download=False)
    assert path.parent == public_data


def test_mirror_overrides_committed_copy(public_data, monkeypatch, tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "gsm8k-test.jsonl").write_bytes((public_data / "gsm8k-test.jsonl").read_bytes())
    monkeypatch.setenv(data.MIRROR_ENV, str(mirror))
    assert data.fetch("gsm8k-test", download=False).parent == mirror


def test_corrupt_committed_copy_fails_loudly(fake_registry, monkeypatch):
    _, tmp = fake_registry
    monkeypatch.delenv(data.MIRROR_ENV, raising=False)
    monkeypatch.setattr(data, "COMMITTED_DIR", tmp)
    (tmp / "fake.txt").write_bytes(b"edited by hand")
    with pytest.raises(DataFileError, match="corrupt"):
        data.fetch("fake", download=False)


def test_data_readme_lists_every_committed_file(public_data):
    readme = (public_data.parent / "README.md").read_text()
    for spec in data.DATA_FILES.values():
        assert spec.filename in readme and spec.sha256 in readme and spec.url in readme
