import json
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from longctx.errors import DataFileError
from longctx.requests import Generation, Request, StopRule, request_key, unique_requests
from longctx.runner import Block, block_rows, content_key, make_row, numerics_note
from longctx.store import ResultsStore

ROOT = Path(__file__).resolve().parents[1]


def _req(i=0, **kw):
    return Request(
        task="t", example_id=f"e{i}", prompt=f"prompt {i}", gold=("x",), condition={"a": 1, **kw}
    )


def _row(req, key="k"):
    gen = Generation("out", "out\n", 3, 2, True, 0.5, 1)
    return make_row(
        key,
        req,
        gen,
        model="m",
        fingerprint="fp",
        prompt_mode="auto",
        rendered_prompt=req.prompt,
        params={},
    )


def test_request_key_depends_on_every_identity_field():
    base = request_key("fp", _req(), "auto")
    assert base == request_key("fp", _req(), "auto")
    assert base != request_key("fp2", _req(), "auto")
    assert base != request_key("fp", _req(1), "auto")
    assert base != request_key("fp", _req(b=2), "auto")
    assert base != request_key("fp", _req(), "raw")
    assert base != request_key("fp", replace(_req(), max_new_tokens=7), "auto")
    assert base != request_key("fp", replace(_req(), stop=StopRule(newline=False)), "auto")
    # condition key order does not matter
    assert request_key("fp", Request("t", "e", "p", (), {"a": 1, "b": 2}), "auto") == request_key(
        "fp", Request("t", "e", "p", (), {"b": 2, "a": 1}), "auto"
    )


def test_rows_carry_provenance(tmp_path):
    store = ResultsStore(tmp_path, "m", "exp")
    store.append([_row(_req(), "k1")])
    (row,) = store.rows()
    for field in (
        "model",
        "model_fingerprint",
        "prompt",
        "output",
        "prompt_tokens",
        "batch_seconds",
        "longctx_version",
        "params",
        "condition",
        "created",
    ):
        assert field in row
    assert store.path == tmp_path / "m" / "exp" / "generations.jsonl"


def test_a_last_line_cut_inside_a_utf8_character_is_torn_not_unreadable(tmp_path):
    # A kill -9 or power cut can end the plain file inside a multibyte character ("é" is two
    # bytes): only that unfinished line is dropped; rows(), pack() and append() still work.
    store = ResultsStore(tmp_path, "m", "exp")
    store.append([_row(_req(0), "k1")])
    whole = json.dumps(_row(_req(1), "k2") | {"output": "café — Привет"}, ensure_ascii=False)
    cut = whole.encode("utf-8")
    cut = cut[: cut.index("é".encode()) + 1]  # the first byte of "é" only
    with open(store.path, "ab") as f:
        f.write(cut)
    with pytest.warns(UserWarning, match="truncated last line 2"):
        assert [r["key"] for r in store.rows()] == ["k1"]
    assert store.keys() == {"k1"}
    store.append([_row(_req(2), "k3")])  # cuts the torn tail first
    assert [r["key"] for r in store.rows()] == ["k1", "k3"]
    # damage inside the file (not its unfinished end) is named, not dropped
    with open(store.path, "ab") as f:
        f.write(b'{"key": "\xc3"}\n')
    store.append([_row(_req(4), "k5")])
    with pytest.raises(DataFileError, match="line 3: not valid UTF-8"):
        store.rows()


def test_torn_last_line_is_skipped_and_not_glued(tmp_path):
    store = ResultsStore(tmp_path, "m", "exp")
    store.append([_row(_req(0), "k1")])
    with open(store.path, "a") as f:
        f.write('{"key": "k2", "outp')  # killed mid-write
    with pytest.warns(UserWarning, match="truncated last line"):
        assert [r["key"] for r in store.rows()] == ["k1"]
    store.append([_row(_req(2), "k3")])  # the next append cuts the torn tail first
    assert [r["key"] for r in store.rows()] == ["k1", "k3"]
    with open(store.path, "a") as f:
        f.write("garbage\n")
    store.append([_row(_req(4), "k5")])
    with pytest.raises(
        DataFileError, match="line 3: not valid JSON"
    ):  # mid-file damage is not silently dropped
        store.rows()


RUNNER = r"""
import sys
from longctx.reader import Reader
from longctx.runner import generate_missing
from longctx.store import ResultsStore
from longctx.tasks import kv_retrieval as kv
from dataclasses import replace
# A short budget: what is tested is resuming, not answering.
reqs = [replace(r, max_new_tokens=12) for r in kv.make_requests(kv.synthetic_examples(3, 4, seed=11), [0.0, 1.0])]
store = ResultsStore(sys.argv[1], "smollm2-135m-instruct", "kv")
rows = generate_missing(reqs, store, Reader("smollm2-135m-instruct", device="cpu", dtype="float32"), batch_size=1,
                        progress=False)
print("ROWS", len(rows), flush=True)
"""


@pytest.mark.model
def test_killed_run_resumes_without_losing_rows(tmp_path):
    script = tmp_path / "runner.py"
    script.write_text(RUNNER)
    store = ResultsStore(tmp_path, "smollm2-135m-instruct", "kv")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 300
    while time.time() < deadline and (
        not store.path.exists() or len(store.path.read_text().splitlines()) < 2
    ):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = store.rows()
    assert 2 <= len(before) < 6, "the run should have been killed midway"
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert "ROWS 6" in done.stdout
    after = store.rows()
    assert len(after) == 6 and len({r["key"] for r in after}) == 6
    assert after[: len(before)] == before  # finished rows were kept, not recomputed


def test_unique_requests_drops_repeats_keeps_order():
    a = Request(task="t", example_id="1", prompt="p", gold=("x",), condition={"k": 1})
    b = Request(task="t", example_id="1", prompt="p", gold=("x",), condition={"k": 2})
    assert unique_requests([a, b, a, b]) == [a, b]


# --- packed rows ---------------------------------------------------------------------------


def _rows_of(n, start=0):
    return [_row(_req(i), key=f"k{i}") for i in range(start, start + n)]


def test_pack_moves_appended_rows_into_the_xz_file_and_rows_read_both(tmp_path):
    import lzma

    store = ResultsStore(tmp_path, "m", "exp")
    first = _rows_of(3)  # made once: rows carry their creation second
    store.append(first)
    assert store.pack() == 3
    assert not store.path.exists() and store.packed_path.name == "generations.jsonl.xz"
    assert [r["key"] for r in store.rows()] == ["k0", "k1", "k2"]
    packed_bytes = store.packed_path.read_bytes()
    # new rows append to the plain file and are read after the packed ones
    store.append(_rows_of(2, start=3))
    assert [r["key"] for r in store.rows()] == ["k0", "k1", "k2", "k3", "k4"] and store.keys() == {
        f"k{i}" for i in range(5)
    }
    # a row packed already is dropped, not duplicated; pack is idempotent
    store.append(_rows_of(1))
    assert store.pack() == 2 and [r["key"] for r in store.rows()] == ["k0", "k1", "k2", "k3", "k4"]
    assert (
        store.pack() == 0 and len(lzma.decompress(store.packed_path.read_bytes()).splitlines()) == 5
    )
    # the same rows pack to the same bytes (no churn in git)
    again = ResultsStore(tmp_path, "m2", "exp")
    again.append(first)
    again.pack()
    assert again.packed_path.read_bytes() == packed_bytes


def test_rows_read_from_a_packed_store_are_the_callers_to_change(tmp_path):
    store = ResultsStore(tmp_path, "m", "exp")
    store.append(_rows_of(1))
    store.pack()
    store.rows()[0]["output"] = "changed"
    assert store.rows()[0]["output"] == "out"


def test_a_damaged_packed_file_is_a_clear_error(tmp_path):
    store = ResultsStore(tmp_path, "m", "exp")
    store.append(_rows_of(2))
    store.pack()
    store.packed_path.write_bytes(store.packed_path.read_bytes()[:-20])
    with pytest.raises(DataFileError, match="damaged.*git checkout"):
        store.rows()


def test_store_of_a_results_file_and_folders_with_rows(tmp_path):
    a = ResultsStore(tmp_path, "a", "exp")
    a.append(_rows_of(1))
    a.pack()
    b = ResultsStore(tmp_path, "b", "exp")
    b.append(_rows_of(1))
    ResultsStore(tmp_path, "c", "other").append(_rows_of(1))
    assert ResultsStore.folders(tmp_path, "exp") == ["a", "b"]
    assert ResultsStore.at(a.packed_path).dir == a.dir and ResultsStore.at(b.path).dir == b.dir
    with pytest.raises(DataFileError, match="not a results file"):
        ResultsStore.at(tmp_path / "a" / "exp" / "rows.csv")


def test_merge_adds_only_missing_rows_from_plain_or_xz_copies(tmp_path):
    import json
    import lzma

    store = ResultsStore(tmp_path, "m", "exp")
    store.append(_rows_of(2))
    copy = tmp_path / "m__exp.jsonl.xz"
    copy.write_bytes(lzma.compress("".join(json.dumps(r) + "\n" for r in _rows_of(4)).encode()))
    assert store.merge(copy) == 2 and [r["key"] for r in store.rows()] == ["k0", "k1", "k2", "k3"]
    plain = tmp_path / "m__exp.jsonl"
    plain.write_text("".join(json.dumps(r) + "\n" for r in _rows_of(5)))
    assert store.merge(plain) == 1 and store.merge(plain) == 0
    bad = tmp_path / "bad.jsonl.xz"
    bad.write_bytes(b"not xz")
    with pytest.raises(DataFileError, match="not a generations file"):
        store.merge(bad)
    keyless = tmp_path / "keyless.jsonl"
    keyless.write_text('{"output": "x"}\n')
    with pytest.raises(DataFileError, match="keyless.jsonl, line 1: not a stored row"):
        store.merge(keyless)


def test_all_under_lists_every_store_with_rows_packed_or_not(tmp_path):
    a = ResultsStore(tmp_path, "a", "x")
    a.append(_rows_of(1))
    a.pack()
    ResultsStore(tmp_path, "b", "y").append(_rows_of(1))
    (tmp_path / "c" / "z").mkdir(parents=True)  # a folder without rows is no store
    assert [(s.dir.parent.name, s.dir.name) for s in ResultsStore.all_under(tmp_path)] == [
        ("a", "x"),
        ("b", "y"),
    ]
    assert [s.dir.parent.name for s in ResultsStore.all_under(tmp_path, "y")] == ["b"]


def test_a_generation_cap_cuts_every_budget_above_it_and_gives_capped_requests_their_own_key():
    from longctx.errors import ParameterError
    from longctx.requests import cap_generation, request_key

    def req(budget):
        return Request(task="t", example_id="1", prompt="p", gold=("x",), max_new_tokens=budget)

    full = req(512)
    try:
        cap_generation(24)
        assert req(512).max_new_tokens == 24 and req(8).max_new_tokens == 8
        assert request_key("fp", req(512), "auto") != request_key("fp", full, "auto")
        from longctx.chapters.tag_needles.tagger import LLMTagger

        tagger = LLMTagger("smollm2-135m-instruct", results_dir=".")
        assert tagger.budget == {"classification": 24, "ie": 24}
    finally:
        cap_generation(None)
    assert req(512).max_new_tokens == 512
    with pytest.raises(ParameterError, match="positive number of tokens"):
        cap_generation(0)


# ----------------------------------------------------------------- stores under attack


def _writer_that_packs(root: str, rounds: int) -> None:
    store = ResultsStore(root, "m", "exp")
    for k in range(rounds):
        store.append(_rows_of(5, start=5 * k))
        store.pack()


def test_reads_racing_pack_never_lose_a_row_or_crash(tmp_path):
    """A run asks its store for keys before every chunk while `longctx pack` may run: a read
    between pack's writing the packed file and deleting the appended one saw rows vanish."""
    import multiprocessing

    store = ResultsStore(tmp_path, "m", "exp")
    writer = multiprocessing.get_context("spawn").Process(
        target=_writer_that_packs, args=(str(tmp_path), 60)
    )
    writer.start()
    seen, reads = 0, 0
    while writer.is_alive() or reads == 0:
        keys, rows = store.keys(), store.rows()
        assert len(keys) >= seen and len(rows) >= seen, "a read lost stored rows"
        assert len({r["key"] for r in rows}) == len(rows)
        seen, reads = len(keys), reads + 1
    writer.join()
    assert writer.exitcode == 0 and len(store.rows()) == len(store.keys()) == 300 and reads > 10


def test_two_writers_of_one_row_store_it_once(tmp_path):
    first, second = ResultsStore(tmp_path, "m", "exp"), ResultsStore(tmp_path, "m", "exp")
    rows = _rows_of(4)
    assert first.append(rows[:3]) == 3
    assert second.append(rows) == 1  # the other run stored three of them meanwhile
    assert [r["key"] for r in first.rows()] == ["k0", "k1", "k2", "k3"]
    assert len(first.path.read_text().splitlines()) == 4


def test_a_row_of_another_model_is_refused_at_read_pack_and_merge(tmp_path):
    store = ResultsStore(tmp_path, "m", "exp")
    store.append(_rows_of(2))
    stranger = {**_rows_of(1, start=9)[0], "model_fingerprint": "other-weights"}
    with store.path.open("a") as f:
        f.write(json.dumps(stranger) + "\n")
    for action in (store.rows, store.pack):
        with pytest.raises(
            DataFileError, match=r"generations.jsonl, line 3: a row of other-weights"
        ):
            action()
    store.path.write_text("".join(json.dumps(r) + "\n" for r in _rows_of(2)))
    store.pack()
    copy = tmp_path / "m__exp.jsonl"
    copy.write_text(json.dumps(stranger) + "\n")
    with pytest.raises(DataFileError, match=r"m__exp.jsonl, line 1: a row of other-weights"):
        store.merge(copy)


@pytest.mark.parametrize("line", ["{}", "[1, 2]", "42", '"text"', '{"key": 7}'])
def test_a_line_that_is_json_but_not_a_row_is_one_line_naming_it(tmp_path, line):
    store = ResultsStore(tmp_path, "m", "exp")
    rows = _rows_of(2)
    store.dir.mkdir(parents=True)
    store.path.write_text(json.dumps(rows[0]) + "\n" + line + "\n" + json.dumps(rows[1]) + "\n")
    with pytest.raises(DataFileError, match=r"line 2: not a stored row"):
        store.rows()


def test_no_lock_file_is_tracked():
    tracked = subprocess.run(
        ["git", "ls-files", "*.lock"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    assert tracked == []


@pytest.mark.parametrize(
    "name", ["..__evil.jsonl.xz", "..__..jsonl.xz", "m__..jsonl.xz", ".__x.jsonl", "a\\b__x.jsonl"]
)
def test_merge_refuses_a_copy_whose_name_leaves_the_results_folder(tmp_path, name):
    import lzma

    root = tmp_path / "results"
    copy = tmp_path / name.replace("\\", "_")
    rows = "".join(json.dumps(r) + "\n" for r in _rows_of(2))
    copy.write_bytes(lzma.compress(rows.encode()) if name.endswith(".xz") else rows.encode())
    done = subprocess.run(
        [sys.executable, "-m", "longctx.cli", "merge", "--results-dir", str(root), str(copy)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if "\\" in name:  # a file name cannot hold a separator here: the store refuses it directly
        with pytest.raises(DataFileError, match="not a plain folder name"):
            ResultsStore(root, "a\\b", "x")
        return
    assert done.returncode == 2 and "not a plain folder name" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1
    assert not list(tmp_path.rglob("generations.jsonl*"))


def test_a_write_the_disk_refuses_leaves_no_torn_row_and_says_so_in_one_line(tmp_path, monkeypatch):
    """A full disk mid-batch: the partial batch is cut, every earlier row is kept, and the
    error is one line naming the file."""
    import builtins
    import errno

    from longctx.store import StoreWriteError

    store = ResultsStore(tmp_path, "m", "exp")
    store.append(_rows_of(2))
    real_open = builtins.open

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.f.__exit__(*exc)

        def tell(self):
            return self.f.tell()

        def truncate(self, n):
            return self.f.truncate(n)

        def write(self, data):
            self.f.write(data[: len(data) // 2])  # half a batch reaches the disk
            raise OSError(errno.ENOSPC, "No space left on device")

    def full_open(path, mode="r", *a, **k):
        f = real_open(path, mode, *a, **k)
        return Full(f) if str(path) == str(store.path) and "a" in mode else f

    monkeypatch.setattr(builtins, "open", full_open)
    with pytest.raises(StoreWriteError, match="No space left on device") as err:
        store.append(_rows_of(3, start=2))
    monkeypatch.setattr(builtins, "open", real_open)
    assert "\n" not in str(err.value) and "every row written before is kept" in str(err.value)
    assert store.path.read_bytes().endswith(b"\n")
    assert [r["key"] for r in store.rows()] == ["k0", "k1"]


def test_a_read_only_results_folder_is_one_line(tmp_path):
    import os

    from longctx.store import StoreWriteError

    if os.geteuid() == 0:  # root writes anywhere: a read-only mount is what stops it
        folder = tmp_path / "ro"
        folder.mkdir()
        store = ResultsStore(folder / "file-not-folder", "m", "exp")
        (folder / "file-not-folder").write_text("a file where the results folder should be")
    else:
        (tmp_path / "ro").mkdir(mode=0o500)
        store = ResultsStore(tmp_path / "ro", "m", "exp")
    with pytest.raises(StoreWriteError, match="cannot write"):
        store.append(_rows_of(1))


def test_a_line_being_written_by_another_process_is_skipped_without_a_warning(tmp_path):
    import warnings

    store = ResultsStore(tmp_path, "m", "exp")
    store.append(_rows_of(1))
    with open(store.path, "a") as f:
        f.write('{"key": "k1", "out')  # a writer is mid-row
    holder = subprocess.Popen(
        [sys.executable, "-c", f"from filelock import FileLock; import time\n"
         f"with FileLock({str(store.path) + '.lock'!r}):\n    print('held', flush=True)\n    time.sleep(20)"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert [r["key"] for r in store.rows()] == ["k0"]
    finally:
        holder.kill()
        holder.wait()
    with pytest.warns(UserWarning, match="truncated last line 2"):  # nobody writes now: torn
        assert [r["key"] for r in store.rows()] == ["k0"]


def test_rows_computed_otherwise_than_the_stored_ones_get_one_note():
    bf16 = {"params": {"device": "cpu", "dtype": "bfloat16"}}
    cuda = {"params": {"device": "cuda", "dtype": "bfloat16"}}
    here = {"batch_size": 8, "device": "cpu", "dtype": "float32"}
    note = numerics_note([bf16, cuda, bf16], here, "r/m/x/generations.jsonl.xz")
    assert note == (
        "note: r/m/x/generations.jsonl.xz holds rows made on cpu bfloat16, cuda bfloat16; "
        "these run on cpu float32. Greedy answers can differ between the two: "
        "`longctx replay r/m/x/generations.jsonl.xz --n 16` on this machine measures how often."
    )
    hf = numerics_note([bf16], {**here, "backend": "hf"}, "s")
    assert "`longctx replay s --n 16 --dtype float32`" in hf  # replays in this run's dtype
    assert numerics_note([bf16], {**here, "dtype": "bfloat16"}, "s") is None  # same numerics
    assert numerics_note([], here, "s") is None  # a new store
    assert numerics_note([{"layer": 3}], here, "s") is None  # attention rows carry no params
    assert numerics_note([bf16], {"backend": "openai"}, "s") is None  # a server names neither


def _merge_cli(root, copy):
    return subprocess.run(
        [sys.executable, "-m", "longctx.cli", "merge", "--results-dir", str(root), str(copy)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def _keyed(i, model, fingerprint, **fields):
    """A row of request ``i`` by ``model`` whose key is the one its content gives."""
    row = _row(_req(i)) | {"model": model, "model_fingerprint": fingerprint, **fields}
    return row | {"key": content_key(row)}


@pytest.mark.parametrize(
    "forged, why",
    [
        ({"key": ""}, "is not a request key"),
        ({"key": "x"}, "is not a request key"),
        ({"key": "../../etc"}, "is not a request key"),
        ({"key": "a" * 5000}, "is not a request key"),
        ({"model": "smollm2-135m-instruct"}, "does not belong in the folder"),
        ({"backend": "openai:served"}, "a row of fp (openai:served)"),  # unlike the rows before it
        ({"model": None}, "names no model"),
        # the key of request 2 over another condition or prompt: its content gives another key
        ({"condition": {"a": 2}}, "its content gives the key"),
        ({"request": {"prompt": "forged", "system": None}}, "its content gives the key"),
        ({"request": None}, "does not carry the request it answers"),
    ],
)
def test_merge_refuses_a_forged_row_in_one_line_and_adds_nothing(tmp_path, forged, why):
    # The door a contributed reader comes through: a key that is no request key, or a row of
    # another model or backend than the folder the file name gives, is refused naming the
    # file and line, and no row of that copy is added (not even the good ones before it).
    root = tmp_path / "results"
    model = "qwen2.5-coder-0.5b-instruct"
    good = [_keyed(i, model, "fp") for i in range(3)]
    copy = tmp_path / f"{model}__exp.jsonl"
    bad = {**good[2], **forged}
    copy.write_text("".join(json.dumps(r) + "\n" for r in [*good[:2], bad]))
    done = _merge_cli(root, copy)
    assert done.returncode == 2, done.stderr
    assert f"{copy.name}, line 3: " in done.stderr and why in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1
    assert not list(root.rglob("generations.jsonl*"))
    copy.write_text("".join(json.dumps(r) + "\n" for r in good))
    assert _merge_cli(root, copy).returncode == 0
    assert len(ResultsStore(root, model, "exp").rows()) == 3


def test_merge_into_a_new_experiment_checks_the_folders_other_rows(tmp_path):
    # A folder with rows of one weights in one experiment refuses another weights' rows in a
    # new experiment: the target's reader comes from the folder's rows, not the file name.
    root = tmp_path / "results"
    model = "smollm2-135m-instruct"
    mine = [_keyed(i, model, "135m") for i in range(2)]
    ResultsStore(root, model, "kv").append(mine)
    theirs = [_keyed(10 + i, model, "0.5b") for i in range(2)]
    copy = tmp_path / f"{model}__other.jsonl"
    copy.write_text("".join(json.dumps(r) + "\n" for r in theirs))
    done = _merge_cli(root, copy)
    assert done.returncode == 2 and "line 1: a row of 0.5b" in done.stderr, done.stderr
    assert not ResultsStore(root, model, "other").exists()


def test_a_short_relative_results_path_is_its_store_not_an_index_error(tmp_path, monkeypatch):
    store = ResultsStore(tmp_path, "m", "exp")
    store.append(_rows_of(1))
    monkeypatch.chdir(store.dir)
    assert ResultsStore.at("generations.jsonl").dir == store.dir
    monkeypatch.chdir("/")
    with pytest.raises(DataFileError, match="not a results file"):
        ResultsStore.at("/generations.jsonl")


def test_merge_refuses_a_copy_name_with_two_separators(tmp_path):
    copy = tmp_path / "a__b__c.jsonl"
    copy.write_text("".join(json.dumps(r) + "\n" for r in _rows_of(1)))
    done = _merge_cli(tmp_path / "results", copy)
    assert done.returncode == 2 and "is not a flat copy of a store" in done.stderr, done.stderr
    assert not (tmp_path / "results").exists()


def test_a_row_nested_past_the_parsers_depth_is_named_not_a_recursion_error(tmp_path):
    store = ResultsStore(tmp_path, "m", "exp")
    store.append(_rows_of(1))
    with open(store.path, "a") as f:
        f.write("[" * 100_000 + "]" * 100_000 + "\n")
    store.append(_rows_of(3))
    with pytest.raises(DataFileError, match="line 2: not valid JSON"):
        store.rows()


def test_a_rows_key_is_the_one_its_content_gives():
    req = _req(3)
    row = _row(req, request_key("fp", req, "auto"))
    assert content_key(row) == row["key"]
    # a row of another backend is keyed with that backend's identity beside the weights
    llama = _row(req, request_key("fp+llamacpp", req, "auto")) | {"backend": "llamacpp"}
    assert content_key(llama) == llama["key"]
    with_system = replace(req, system="be brief")
    assert content_key(_row(with_system)) == request_key("fp", with_system, "auto")
    # rows stored before rows carried their request give no key (merge refuses them)
    assert content_key({k: v for k, v in row.items() if k != "request"}) is None


def test_a_row_stored_under_one_requests_key_but_answering_another_is_refused(tmp_path):
    # A forged or mis-merged row under request A's key that carries B's condition (or B's
    # prompt) was returned as A's answer; now reading the block names the row.
    a, b = _req(0), _req(0, a=2)
    key_a = request_key("fp", a, "auto")
    store = ResultsStore(tmp_path, "m", "exp")
    block = Block("head", "exp", [a], True)
    for forged in (_row(b, key_a), _row(a, key_a) | {"request": {"prompt": "x", "system": None}}):
        store.path.unlink(missing_ok=True)
        store.append([forged])
        with pytest.raises(DataFileError, match="stored under key .* (answers t e0|holds content)"):
            block_rows(block, store, [key_a])
    store.path.unlink()
    store.append([_row(a, key_a)])
    assert [r["key"] for r in block_rows(block, store, [key_a])] == [key_a]


def test_merge_streams_a_copy_and_refuses_an_xz_bomb_at_its_first_long_line(tmp_path):
    # 59 KB that decompress to 1 GB were decompressed whole (1 GB resident) before the first
    # line was looked at; the copy is now read a line at a time.
    import lzma
    import tracemalloc

    bomb = tmp_path / "m__exp.jsonl.xz"
    packer = lzma.LZMACompressor(preset=0)
    with open(bomb, "wb") as f:
        for _ in range(400):
            f.write(packer.compress(b"x" * 2**20))
        f.write(packer.flush())
    assert bomb.stat().st_size < 2**20
    store = ResultsStore(tmp_path, "m", "exp")
    tracemalloc.start()
    try:
        with pytest.raises(DataFileError, match=r"m__exp.jsonl.xz, line 1: longer than 64 MiB"):
            store.merge(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 300 * 2**20, peak  # never the 400 MB line, let alone the whole file
    assert not store.exists()


def test_a_results_file_that_is_a_folder_is_named_as_such(tmp_path):
    # A folder named generations.jsonl drew "free some disk space".
    store = ResultsStore(tmp_path, "m", "exp")
    store.path.mkdir(parents=True)
    for action in (lambda: store.append(_rows_of(1)), store.rows, store.keys):
        with pytest.raises(DataFileError, match="is a folder, not a results file"):
            action()


def test_a_refused_write_says_the_fix_that_fits_it(tmp_path):
    import errno

    from longctx.store import StoreWriteError

    full = str(StoreWriteError(tmp_path, OSError(errno.ENOSPC, "No space left on device")))
    locked = str(StoreWriteError(tmp_path, OSError(errno.EROFS, "Read-only file system")))
    assert "free some disk space" in full and "writable" not in full
    assert "writable" in locked and "disk space" not in locked


def test_pack_says_a_damaged_packed_file_and_packs_the_other_stores(tmp_path, capsys):
    # A damaged packed file beside no new rows was reported as "0 rows packed", and one
    # damaged store stopped pack for every reader.
    from longctx.cli import main

    damaged = ResultsStore(tmp_path, "a", "exp")
    damaged.append(_rows_of(2))
    damaged.pack()
    damaged.packed_path.write_bytes(damaged.packed_path.read_bytes()[:-20])
    other = ResultsStore(tmp_path, "b", "exp")
    other.append(_rows_of(2))
    assert main(["pack", "--results-dir", str(tmp_path)]) == 2
    out, err = capsys.readouterr()
    assert "skipped a/exp" in err and "damaged" in err and "b/exp: 2 rows packed" in out
    assert other.packed_path.exists() and not other.path.exists()


def test_a_folder_with_an_odd_name_is_skipped_with_a_warning_not_fatal(tmp_path):
    good = ResultsStore(tmp_path, "m", "exp")
    good.append(_rows_of(1))
    odd = tmp_path / "m " / "exp"
    odd.mkdir(parents=True)
    (odd / ResultsStore.FILENAME).write_text("")
    with pytest.warns(UserWarning, match="skipping .*m /exp.*not a plain folder name"):
        assert [s.dir for s in ResultsStore.all_under(tmp_path)] == [good.dir]
