"""Chapter plans: the notebooks use the book scale, the book scale is fully committed (a
reproduce run is all cache hits), and every paper-scale command a chapter prints builds."""

import ast
import re
import time
from pathlib import Path

import jupytext
import pytest

from longctx.chapters import (
    Chapter,
    ChapterResult,
    Run,
    chapters,
    contract,
    get_chapter,
    parameter_notes,
    scale,
    scales,
)
from longctx.claims import read_claims
from longctx.errors import ParameterError
from longctx.reader import Reader
from longctx.reproduce import block_claims, chapter_blocks
from longctx.runner import all_requests, run
from rows import attention_row, stored_row

ROOT = Path(__file__).resolve().parents[1]
MODEL = "qwen2.5-coder-0.5b-instruct"


def parameter_cell(name):
    nb = jupytext.read(ROOT / contract(name).notebook)
    return next(c for c in nb.cells if "parameters" in c.metadata.get("tags", [])).source


@pytest.mark.parametrize("name", sorted(chapters()))
def test_the_parameter_cell_names_a_scale_and_holds_no_chapter_value(name):
    """The chapter's values live in its scales file alone: the cell names the ``book`` set,
    overrides nothing, and fits ten lines; every parameter of the file says what it means."""
    source = parameter_cell(name)
    values = {
        t.id: ast.literal_eval(node.value)
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        for t in node.targets
    }
    assert values["scale"] == "book" and values.get("params", {}) == {}
    assert not set(values) & set(scale(name, "book")), "a chapter value retyped in the cell"
    assert len([ln for ln in source.splitlines() if ln.strip()]) <= 10
    notes = parameter_notes(name)
    assert set(notes) == set(scale(name, "book")) and all(notes.values()), name


def dry_run(name: str, scale_name: str):
    """The default reader's dry run of one chapter at a scale, against the committed rows."""
    return run(
        chapter_blocks([name], scale_name, reader=Reader(MODEL)),
        Reader(MODEL),
        ROOT / "data" / "results",
        dry_run=True,
        log=lambda m: None,
    )


@pytest.mark.parametrize("name", sorted(chapters()))
def test_book_scale_is_all_cache_hits(name):
    """`longctx reproduce --scale book` finds every row committed: nothing to generate."""
    report = dry_run(name, "book")
    assert report.blocks and report.missing == 0, [
        b for b in report.blocks if b["stored"] < b["requests"]
    ]


@pytest.mark.parametrize("name", sorted(chapters()))
def test_claims_scale_is_a_subset_of_book_and_every_claim_finds_its_blocks(name):
    """`longctx reproduce --scale claims` on the default reader is all cache hits (it asks no
    arm the book does not), every claim of the chapter in the claims file names blocks of
    that scale (its claim_blocks), and every block serves some claim (nothing else is run):
    a chapter whose rules all still wait in the pre-registration file asks nothing."""
    report = dry_run(name, "claims")
    wanted = contract(name).claim_blocks
    assert set(wanted) == {c.id for c in read_claims() if c.chapter == name}
    assert (report.blocks or not wanted) and report.missing == 0, [
        b for b in report.blocks if b["stored"] < b["requests"]
    ]
    served = {b["block"]: block_claims(name, b["block"]) for b in report.blocks if b["requests"]}
    for claim, parts in wanted.items():
        assert not parts or any(claim in cs for cs in served.values()), f"{claim}: no block"
    # C-NORM's QA block adds a shortest-tokenization control beside the claim's two arms
    assert all(served.values()), [b for b, cs in served.items() if not cs]


@pytest.mark.parametrize("name", sorted(chapters()))
def test_the_papers_design_plans_at_smoke_scale(name):
    requests = all_requests(chapter_blocks([name], "smoke", reader=Reader(MODEL)))
    assert requests and len(
        {(r.example_id, repr(sorted(r.condition.items()))) for r in requests}
    ) == len(requests)


def test_printed_reproduce_commands_name_real_chapters_and_scales():
    found = 0
    for path in sorted((ROOT / "notebooks").glob("*.py")):
        for command in re.findall(r"longctx reproduce[^\n`]*", path.read_text()):
            named = re.search(r"--chapters ([\w ]+?)(?: --|$)", command)
            names = named.group(1).split() if named else list(chapters())
            wanted = re.search(r"--scale (\w+)", command)
            for name in names:
                assert name in chapters(), f"{path.name}: {command}"
                assert (wanted.group(1) if wanted else "book") in scales(name), (
                    f"{path.name}: {command}"
                )
                found += 1
    assert found


def test_multidoc_positions_per_size():
    """The paper's positions only exist at 30 documents; a size without its own list is an error."""
    from longctx.chapters import multidoc_qa

    params = scale("multidoc_qa", "paper", num_questions=2, detail_questions=2)
    by_size = {}
    for r in all_requests(multidoc_qa.design.blocks(params)):
        if r.condition["setting"] == "documents":
            by_size.setdefault(r.condition["num_documents"], set()).add(
                r.condition["gold_index"] + 1
            )
    assert by_size == {10: {1, 5, 10}, 20: {1, 5, 10, 15, 20}, 30: {1, 5, 10, 15, 20, 25, 30}}
    with pytest.raises(ParameterError, match="position 15 outside 1..10"):
        multidoc_qa.design.blocks({**params, "gold_positions": [1, 5, 10, 15, 20, 25, 30]})
    with pytest.raises(ParameterError, match="no positions for 30 documents"):
        multidoc_qa.design.blocks({**params, "gold_positions": {"10": [1], "20": [1]}})


def test_unknown_scale_and_parameter_are_clear_errors():
    with pytest.raises(ParameterError, match="no scale 'huge'"):
        scale("kv_retrieval", "huge")
    with pytest.raises(ParameterError, match="unknown parameters"):
        scale("kv_retrieval", "book", num_pair=[3])
    with pytest.raises(ParameterError, match="unknown chapter"):
        get_chapter("nope")


def test_cnorm_choices_follow_the_paper_rule():
    """ABS: argmax of the mean over samples, ties to the candidate listed first; shortest:
    fewest mean tokens among reformatting candidates ("none" excluded), ties by name."""
    from longctx.chapters.cnorm.design import choices

    # Same tokens as "/": "." sorts first
    rows = [
        {"candidate": c, "sample": s, "abs": a, "tokens": t}
        for c, s, a, t in [
            ("none", 0, 0.9, 100),
            ("none", 1, 0.1, 100),  # mean 0.5, fewest tokens but not a format
            (":", 1, 0.2, 130),
            (":", 0, 0.8, 130),  # mean 0.5: ties with "none", listed later
            ("/", 0, 0.4, 120),
            ("/", 1, 0.4, 120),
            (".", 0, 0.1, 120),
            (".", 1, 0.2, 120),
        ]
    ]
    chosen, shortest, scores = choices(rows)
    assert chosen == "none" and shortest == "." and scores[":"] == [0.8, 0.2]
    rows[0]["abs"] = 0.5  # none now 0.3: ":" wins
    assert choices(rows)[0] == ":"


def test_attention_stage_builds_the_second_block_only_once_every_item_is_stored(tmp_path):
    """C-NORM's QA prompts depend on the delimiter its calibration rows choose: a dry run
    with part of the calibration stored must not guess; with all of it, the QA block exists."""
    from longctx.attention import attention_key
    from longctx.models import resolve_model
    from longctx.requests import Request
    from longctx.runner import Block, stored

    items = [
        {"prompt": f"{c} {i}", "candidate": c, "sample": i} for c in ("none", ":") for i in range(2)
    ]
    made = []

    def followup(rows):
        made.append([r["candidate"] for r in rows])
        return Block(
            "qa",
            "qa_exp",
            [Request(task="t", example_id="e", prompt="x", gold=("a",), condition={})],
            True,
        )

    block = Block(
        "select", "sel", [], True, followup, attention=items, followup_experiment="qa_exp"
    )
    store = Reader(MODEL).store(tmp_path, "sel")
    fp = resolve_model(MODEL).fingerprint
    store.append(
        [
            attention_row(
                attention_key(fp, it["prompt"], "auto", -1, False),
                model=MODEL,
                model_fingerprint=fp,
                **it,
            )
            for it in items[:3]
        ]
    )
    report = run([block], Reader(MODEL), tmp_path, dry_run=True, log=lambda m: None)
    assert [(b["block"], b["stored"], b["requests"]) for b in report.blocks] == [
        ("select", 3, 4)
    ] and not made
    store.append(
        [
            attention_row(
                attention_key(fp, items[3]["prompt"], "auto", -1, False),
                model=MODEL,
                model_fingerprint=fp,
                **{**items[3], "abs": 0.9},
            )
        ]
    )
    report = run([block], Reader(MODEL), tmp_path, dry_run=True, log=lambda m: None)
    assert [(b["block"], b["stored"], b["requests"]) for b in report.blocks] == [
        ("select", 4, 4),
        ("qa", 0, 1),
    ]
    assert made == [["none", "none", ":", ":"]]
    assert len(stored([block], Reader(MODEL), tmp_path)) == 4


def test_multidoc_open_domain_block_is_optional_and_builds_every_k():
    from longctx.chapters import multidoc_qa

    params = scale("multidoc_qa", "book", num_questions=2, detail_questions=2, open_domain_ks=[])
    assert not any(b.experiment == "open_domain" for b in multidoc_qa.design.blocks(params))
    blocks = multidoc_qa.design.blocks(
        {**params, "open_domain_ks": [5, 20], "open_domain_questions": 3}
    )
    od = [b for b in blocks if b.experiment == "open_domain"]
    assert len(od) == 1 and [r.condition["k"] for r in od[0].requests] == [5, 20] * 3
    assert all(r.prompt.count("Document [") == r.condition["k"] for r in od[0].requests)


def test_length_alone_arm_takes_a_prefix_of_the_problems():
    from longctx.chapters import length_alone

    params = {
        "num_problems": 4,
        "seed": 0,
        "retrieve_then_solve": False,
        "arms": [
            {"subtasks": ["varsum"], "kinds": ["essay"], "lengths": [0]},
            {"subtasks": ["varsum"], "kinds": ["essay"], "lengths": [64], "num_problems": 2},
        ],
    }
    blocks = length_alone.design.blocks(params)
    ids = {b.name: [r.example_id for r in b.requests] for b in blocks}
    short, long = ids["solve varsum essay between 0"], ids["solve varsum essay between 64"]
    assert len(short) == 4 and long == short[:2]
    with pytest.raises(ParameterError, match="num_problems must be an integer in 1..4"):
        length_alone.design.blocks({**params, "arms": [{**params["arms"][1], "num_problems": 5}]})


def test_whole_unit_chunks_finish_one_example_before_the_next():
    from longctx.requests import Request
    from longctx.runner import approx_tokens, chunks

    def req(example, prompt):
        return Request("t", example, prompt, ("g",))

    # b has one request left, a three: b first (fewest missing), each example by length.
    reqs = [req("a", "x" * 300), req("a", "x" * 10), req("b", "x" * 50), req("a", "x" * 100)]
    got = [
        [(r.example_id, len(r.prompt)) for r in part] for part in chunks(reqs, 2, whole_units=True)
    ]
    assert got == [[("b", 50), ("a", 10)], [("a", 100), ("a", 300)]]
    # Without it, length alone orders the prompts across examples.
    plain = [r for part in chunks(reqs, 2) for r in part]
    assert [approx_tokens(r) for r in plain] == sorted(approx_tokens(r) for r in reqs)
    # The crossing chapter runs question by question.
    assert all(
        b.whole_units for b in get_chapter("crossing").design.blocks(scale("crossing", "book"))
    )


def test_competition_headline_questions_extend_only_the_bm25_experiment():
    """headline_questions > num_questions: the matched control (gold, hard, far) and the BM25
    retention sweep run on the larger sample with the same prompts a run at that
    num_questions makes; everything else keeps the smaller sample's prompts exactly."""
    from longctx.requests import dedupe_key

    chapter = get_chapter("semantic_competition")
    base = {
        **scale("semantic_competition", "book"),
        "num_questions": 3,
        "compare_questions": 2,
        "nq_questions": 0,
        "max_passages": 300,
        "retrievers": ["bm25"],
        "headline_questions": None,
    }

    def keys(params):
        return [{dedupe_key(r) for r in b.requests} for b in chapter.design.blocks(params)]

    extended, small, large = (
        keys({**base, "headline_questions": 6}),
        keys(base),
        keys({**base, "num_questions": 6}),
    )
    assert len(extended) == len(small) == 3  # matched control, BM25 sweep, the rest
    assert (
        extended[:2] == large[:2]
        and len(extended[0]) > len(small[0]) > 0
        and len(extended[1]) > len(small[1]) > 0
    )
    assert extended[2] == small[2]
    with pytest.raises(
        ParameterError, match="headline_questions \\(2\\) must be at least num_questions \\(3\\)"
    ):
        chapter.design.blocks({**base, "headline_questions": 2})


def test_plans_are_built_when_a_run_reaches_them(monkeypatch, tmp_path):
    """A run on a lent GPU starts on the first headline block at once: a chapter's plan is
    built when the iteration first needs one of its blocks, a LazyRequests block when its
    requests are first used, and nothing after the deadline is built at all."""

    from longctx import reproduce
    from longctx.requests import Request
    from longctx.runner import Block, LazyRequests

    built = []

    def chapter(chapter_name, blocks):
        class Fake(Chapter):
            name = chapter_name
            order = ord(chapter_name)
            notebook = f"notebooks/{chapter_name}.py"
            experiments = (chapter_name,)
            claim_blocks: dict = {}

            def scales(self) -> dict:
                return {"book": {}}

            def plan(self, run: Run) -> list:
                return built.append(chapter_name) or blocks

            def claims(self, run: Run) -> dict:
                return {}

            def analyze(self, run: Run) -> ChapterResult:
                return ChapterResult(label="", estimates={}, verdicts={})

        return Fake()

    def req(i):
        return Request("t", f"e{i}", f"prompt {i}", ("g",))

    lazy = LazyRequests(lambda: built.append("b requests") or [req(3), req(4)])
    modules = {
        "a": chapter("a", [Block("a head", "x", [req(1)], True), Block("a rest", "x", [req(2)])]),
        "b": chapter("b", [Block("b head", "x", lazy, True)]),
    }
    monkeypatch.setattr(reproduce, "contract", lambda name: modules[name])

    blocks = iter(reproduce.chapter_blocks(["a", "b"], "book", results=tmp_path))
    assert built == []
    assert next(blocks).name == "a head" and built == ["a"]
    assert next(blocks).name == "b head" and built == ["a", "b"] and not lazy.built
    assert (
        [r.example_id for r in lazy] == ["e3", "e4"]
        and len(lazy) == 2
        and lazy[1].prompt == "prompt 4"
    )
    assert built == ["a", "b", "b requests"]
    assert [b.name for b in blocks] == ["a rest"]

    built.clear()
    report = run(
        reproduce.chapter_blocks(["a", "b"], "book", results=tmp_path),
        Reader(MODEL),
        tmp_path,
        deadline_s=-1,
        log=lambda m: None,
    )
    assert built == [] and report.blocks == [] and "before the next block" in report.stopped_early
    # A dry run has no deadline: it builds and counts everything.
    report = run(
        reproduce.chapter_blocks(["a", "b"], "book", results=tmp_path, dry_run=True),
        Reader(MODEL),
        tmp_path,
        deadline_s=-1,
        dry_run=True,
        log=lambda m: None,
    )
    assert [(b["block"], b["requests"]) for b in report.blocks] == [
        ("a head", 1),
        ("b head", 2),
        ("a rest", 1),
    ]


def test_the_llm_tagger_is_a_block_of_its_own_and_the_tagged_prompts_its_second_stage(tmp_path):
    """Planning never loads the LLM tagger: the chunks it must tag are one block answered by
    the tagger (its deadline, report and store like any block's), and the prompts carrying
    its tags are that block's second stage, built only once every chunk's tags are stored.
    A run answers both stages in order; a plan with no LLM-tag variant has no tagging block."""
    from longctx.chapters import tag_needles
    from longctx.models import load_tokenizer
    from longctx.runner import stored

    params = {
        **scale("tag_needles", "book"),
        "num_cases": 2,
        "lengths": [250],
        "variants": ["baseline", "td_tc_llm"],
        "query_aware_variants": [],
        "long_length": None,
        "short_length": None,
        "tagger_model": MODEL,
    }
    tokenizer = load_tokenizer(MODEL)
    baseline, tags = tag_needles.design.blocks(params, tokenizer, tmp_path)
    assert {r.condition["variant"] for r in baseline.requests} == {"baseline"}
    assert tags.experiment == "tags" and tags.reader == Reader(MODEL) and tags.requests
    assert tags.followup([]) == []  # no tags stored: no tagged prompt can be written
    report = run([baseline, tags], Reader(MODEL), tmp_path, load=_AnsweringLM, progress=False)
    assert [(b["block"].endswith("LLM tags"), b["generated"]) for b in report.blocks] == [
        (False, 2),
        (False, len(tags.requests)),
        (True, 2),
    ]
    rows = stored([baseline, tags], Reader(MODEL), tmp_path)
    assert sorted(r["condition"].get("variant", "tags") for r in rows) == [
        "baseline",
        "baseline",
        *["tags"] * len(tags.requests),
        "td_tc_llm",
        "td_tc_llm",
    ]
    without = tag_needles.design.blocks(
        {**params, "variants": ["baseline", "td_tc_spacy"]}, tokenizer, tmp_path
    )
    assert all(b.reader is None for b in without)
    assert sum(len(b.requests) for b in without) == 4


def test_paper_scale_multidoc_finds_29_distractors_for_every_oracle_question():
    """All 2,655 questions, including nq-1840, whose answer "S" is a substring of every chunk."""
    from longctx.tasks import multidoc_qa as qa

    oracle = qa.read_oracle()
    examples = qa.attach_distractors(oracle, 29, pool=oracle)
    assert len(examples) == 2655 and all(len(e.distractors) == 29 for e in examples)
    letter = next(e for e in examples if e.example_id == "nq-1840")
    assert all(
        " s " not in f" {qa.normalize_answer(d.title + ' ' + d.text)} " for d in letter.distractors
    )


def test_multidoc_headline_is_first_middle_and_last_for_depths_and_for_paper_positions():
    from longctx.chapters import multidoc_qa

    def headline_indices(params):
        blocks = multidoc_qa.design.blocks(params)
        return sorted(
            {r.condition["gold_index"] for b in blocks[1:] if b.headline for r in b.requests}
        )

    book = scale("multidoc_qa", "book", num_questions=2, detail_questions=2, open_domain_ks=[])
    assert headline_indices(book) == [0, 9, 19]
    paper = scale("multidoc_qa", "paper", num_questions=2, detail_questions=2, open_domain_ks=[])
    # Positions 1, 15 and 30 of the paper's 30 documents
    assert headline_indices(paper) == [0, 14, 29]


class _AnsweringLM:
    """Answers every prompt 'ans' in batches, like a backend (no model)."""

    backend = "hf"

    def render(self, prompt, system=None):
        return prompt

    def run_params(self):
        return {"device": "test"}

    def generate(self, call):
        from longctx.requests import Generation

        for start in range(0, len(call.prompts), call.batch_size):
            batch = list(range(start, min(start + call.batch_size, len(call.prompts))))
            call.on_batch(
                batch, [Generation("ans", "ans", 3, 1, True, 0.1, len(batch)) for _ in batch]
            )


def test_copy_to_sends_the_new_rows_compressed_and_merge_takes_them_back(tmp_path):
    """A GPU run's rows come back as one <model>__<experiment>.jsonl.xz per store (the device
    returns at most 8 files of 16 MiB), throttled while running and flushed when the run
    stops; `longctx merge` adds them to another checkout's stores and packs them."""
    import lzma

    from longctx.cli import main
    from longctx.requests import Request
    from longctx.runner import Block
    from longctx.store import ResultsStore

    reqs = [Request("t", f"e{i}", f"prompt {i} " + "filler " * 200, ("ans",)) for i in range(6)]
    device, out = tmp_path / "device", tmp_path / "out"
    report = run(
        [Block("head", "exp", reqs, True)],
        Reader(MODEL),
        device,
        load=_AnsweringLM,
        chunk_prompts=2,
        copy_to=out,
        copy_interval_s=3600,
        progress=False,
        log=lambda m: None,
    )
    assert report.missing == 0
    copy = out / f"{MODEL}__exp.jsonl.xz"
    assert [p.name for p in out.iterdir()] == [copy.name]  # no temporary file left
    stored = ResultsStore(device, MODEL, "exp")
    # throttled to one copy an hour, yet the flush on return copied all six rows
    assert lzma.decompress(copy.read_bytes()) == stored.path.read_bytes()
    assert copy.stat().st_size < stored.path.stat().st_size / 4

    here = tmp_path / "here"
    mine = ResultsStore(here, MODEL, "exp")
    mine.append(stored.rows()[:2])
    assert main(["merge", str(copy), "--results-dir", str(here)]) == 0
    assert mine.keys() == stored.keys() and not mine.path.exists() and mine.packed_path.exists()
    assert (
        main(["merge", str(tmp_path / "no-model-in-name.jsonl.xz"), "--results-dir", str(here)])
        == 2
    )


def test_copy_to_is_flushed_when_the_deadline_stops_a_run(tmp_path, monkeypatch):
    import lzma
    import types

    import longctx.runner as runner
    from longctx.requests import Request
    from longctx.runner import Block
    from longctx.store import ResultsStore

    now = [0.0]
    monkeypatch.setattr(
        runner, "time", types.SimpleNamespace(time=lambda: now[0], strftime=time.strftime)
    )

    class SlowLM(_AnsweringLM):
        def generate(self, call):
            now[0] += 6  # each one-prompt chunk takes 6 s of the 10 s deadline
            super().generate(call)

    reqs = [Request("t", f"e{i}", f"prompt {i}", ("ans",)) for i in range(4)]
    report = run(
        [Block("head", "exp", reqs, True)],
        Reader(MODEL),
        tmp_path / "d",
        load=SlowLM,
        chunk_prompts=1,
        deadline_s=10,
        copy_to=tmp_path / "out",
        progress=False,
        log=lambda m: None,
    )
    assert "deadline" in report.stopped_early and report.missing == 2
    copied = (
        lzma.decompress((tmp_path / "out" / f"{MODEL}__exp.jsonl.xz").read_bytes())
        .decode()
        .splitlines()
    )
    assert len(copied) == len(ResultsStore(tmp_path / "d", MODEL, "exp").rows()) == 2


def test_the_driver_logs_progress_and_time_left_after_each_chunk(tmp_path, monkeypatch):
    """A block of long prompts on a CPU runs for hours; after each chunk the log says how far
    it is, the time per prompt and the time left at that rate."""
    import types

    import longctx.runner as runner
    from longctx.requests import Request
    from longctx.runner import Block

    now = [0.0]
    monkeypatch.setattr(
        runner, "time", types.SimpleNamespace(time=lambda: now[0], strftime=time.strftime)
    )

    class SlowLM(_AnsweringLM):
        def generate(self, call):
            now[0] += 45.0 * len(call.prompts)
            super().generate(call)

    reqs = [Request("t", f"e{i}", f"prompt {i}", ("ans",)) for i in range(6)]
    lines = []
    run(
        [Block("sweep", "exp", reqs, True)],
        Reader(MODEL),
        tmp_path,
        load=SlowLM,
        chunk_prompts=2,
        progress=False,
        log=lines.append,
    )
    chunk_lines = [line for line in lines if "generated" in line]
    assert [line.split("] ")[1] for line in chunk_lines] == [
        "sweep: 2/6 generated, 45.0 s per prompt, about 3 min left",
        "sweep: 4/6 generated, 45.0 s per prompt, about 2 min left",
        "sweep: 6/6 generated, 45.0 s per prompt",
    ]


def test_progress_line_reads_hours_and_fast_rates():
    from longctx.runner import progress_line

    assert progress_line(0, 10, 0.0) == "0/10 generated"
    assert (
        progress_line(40, 168, 40 * 43.6)
        == "40/168 generated, 43.6 s per prompt, about 1 h 33 min left"
    )
    assert progress_line(500, 1000, 100.0) == "500/1000 generated, 5.0 prompts/s, about 2 min left"
    assert progress_line(10, 12, 50.0) == "10/12 generated, 5.0 s per prompt, about 10 s left"


def test_every_chapter_meets_the_contract_and_a_broken_one_is_refused_by_name(tmp_path):
    """Chapters are found, not listed, and checked when found: a method left unwritten, a
    mistyped declaration, a name or store two chapters both claim, or a class that is not
    a chapter is refused at discovery, by name."""
    import sys

    from longctx.chapters import Chapter, contracts, found_chapters, register

    assert all(isinstance(c, Chapter) for c in contracts().values())
    assert [c.order for c in contracts().values()] == sorted(c.order for c in contracts().values())
    good = (
        "from longctx.chapters.contract import Chapter\n"
        "class Probe(Chapter):\n"
        "    name = '{name}'\n"
        "    order = {order}\n"
        "    notebook = 'notebooks/{name}.py'\n"
        "    experiments = ('{store}',)\n"
        "    claim_blocks = {{'c': ('x',)}}\n"
        "    def plan(self, run):\n        return []\n"
        "    def claims(self, run):\n        return {{}}\n"
        "    def analyze(self, run):\n        return None\n"
    )
    cases = {
        "no_analysis": (good.replace("def analyze", "def _analyze"), "lacks the method analyze"),
        "bad_order": (good.replace("order = {order}", "order = 'first'"), "order is 'first'"),
        "shared_store": (good.replace("{store}", "kv"), "share the experiments"),
        "taken_name": (good.replace("name = '{name}'", "name = 'one'"), "share the name 'one'"),
        "no_plan": (good.replace("def plan", "def _plan"), "neither a design module nor a plan"),
    }
    sys.path.insert(0, str(tmp_path))
    try:
        for i, (case, (source, message)) in enumerate(cases.items()):
            package = tmp_path / f"fake_{case}"
            package.mkdir()
            (package / "__init__.py").write_text("")
            (package / "one.py").write_text(good.format(order=1, name="one", store="kv"))
            (package / "two.py").write_text(source.format(order=2, name="two", store=f"s{i}"))
            with pytest.raises(TypeError, match=message):
                found_chapters([str(package)], package.name)
    finally:
        sys.path.remove(str(tmp_path))
    with pytest.raises(TypeError, match="not a Chapter subclass"):
        register({}, dict)


def test_a_design_module_declares_the_stores_the_claim_blocks_and_the_plan():
    """A chapter naming its ``design`` module takes ``EXPERIMENTS``, ``CLAIM_BLOCKS`` and its
    plan (``blocks(params)``) from it; what the class declares itself wins. Every chapter of
    the book names one."""
    import types

    from longctx.chapters import contracts
    from longctx.chapters.contract import Chapter

    probe_design = types.ModuleType("probe_design")
    probe_design.EXPERIMENTS = ("probe_store",)
    probe_design.CLAIM_BLOCKS = {"probe-claim": ("probe",)}
    probe_design.blocks = lambda params: [("planned", params["n"])]

    class Probe(Chapter):
        name = "probe"
        order = 99
        design = probe_design
        experiments = ("its_own",)

        def claims(self, run):
            return {}

        def analyze(self, run):
            return None

    chapter = Probe()
    assert chapter.experiments == ("its_own",)
    assert chapter.claim_blocks == {"probe-claim": ("probe",)}
    assert chapter.plan(types.SimpleNamespace(params={"n": 3})) == [("planned", 3)]
    for name, found in contracts().items():
        assert found.design is not None and found.experiments == found.design.EXPERIMENTS, name


def test_every_chapter_has_one_signature_per_method_and_a_typed_result():
    """One shape for every chapter: ``plan``, ``claims`` and ``analyze`` each take one
    :class:`Run`; ``analyze`` returns a subclass of ``ChapterResult`` (typed fields, no
    ``SimpleNamespace`` left in ``chapters/``), ``claims`` reads no store but through it."""
    import inspect
    import typing

    from longctx.chapters import contracts
    from longctx.chapters.contract import ChapterResult, Run

    for name, chapter in contracts().items():
        for fn in (chapter.plan, chapter.claims, chapter.analyze):
            hints = typing.get_type_hints(fn)
            params = list(inspect.signature(fn).parameters)
            assert params == ["run"] and hints["run"] is Run, (name, fn.__name__)
        assert typing.get_origin(typing.get_type_hints(chapter.claims)["return"]) is dict, name
        assert issubclass(typing.get_type_hints(chapter.analyze)["return"], ChapterResult), name
        assert ".store(" not in inspect.getsource(type(chapter).claims), name
    chapters_dir = Path(__file__).resolve().parents[1] / "lib" / "longctx" / "chapters"
    assert not [p for p in chapters_dir.rglob("*.py") if "SimpleNamespace" in p.read_text()]


def test_one_place_builds_a_run():
    """``Run.of`` is the only constructor call of a run in the library, the scripts and the
    notebooks: findings, the matrix, reproduce and the pages all build their runs there.
    Read from the code's syntax, so no line break hides a call."""
    root = Path(__file__).resolve().parents[1]
    calls = []
    for folder in ("lib", "scripts", "notebooks"):
        for path in sorted((root / folder).rglob("*.py")):
            tree = ast.parse(path.read_text())
            inside_of = {
                id(node)
                for fn in ast.walk(tree)
                if isinstance(fn, ast.FunctionDef) and fn.name == "of"
                for node in ast.walk(fn)
            }
            for node in ast.walk(tree):
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
                    continue
                if node.func.id in ("Run", "RunContext") or (
                    node.func.id == "cls" and path.name == "contract.py"
                ):
                    where = "Run.of" if id(node) in inside_of else node.lineno
                    calls.append(f"{path.relative_to(root)}:{where}")
    # Run.of makes the run and, for a chapter with a premise scale, its premise run
    assert calls == ["lib/longctx/chapters/contract.py:Run.of"] * 2, calls


class _Probe(Chapter):
    """A chapter for the run's own tests: its plan counts how often it is built and, when
    ``sized``, asks for the reader's tokenizer."""

    name = "run-probe"
    order = 99
    notebook = "notebooks/run-probe.py"
    experiments = ("exp",)
    claim_blocks: dict = {}

    def __init__(self, blocks=(), sized=False):
        super().__init__()
        self.blocks, self.sized, self.built = list(blocks), sized, []

    def scales(self) -> dict:
        return {"book": {"n": 1}}

    def plan(self, run: Run) -> list:
        self.built.append(run.params["n"])
        if self.sized:
            run.tokenizer()
        return self.blocks

    def claims(self, run: Run) -> dict:
        return {}

    def analyze(self, run: Run) -> ChapterResult:
        return ChapterResult(label=run.reader.label, estimates={}, verdicts={})


def test_a_run_makes_each_part_once_and_checks_its_parameters_first():
    from longctx.reader import Reader

    run, calls = Run.of(_Probe(), Reader(), results=Path(".")), []
    assert run.once("x", lambda: calls.append(1) or "built") == "built"
    assert run.once("x", lambda: calls.append(1) or "again") == "built" and calls == [1]
    assert run.params == {"n": 1} and run.scale == "book" and not run.dry_run
    with pytest.raises(ParameterError, match="counts things"):
        Run.of(_Probe(), n=0)
    with pytest.raises(ParameterError, match="unknown parameters"):
        Run.of(_Probe(), model="m")


def test_a_run_reads_the_rows_of_its_plan_and_reads_again_after_generating(tmp_path):
    """``run.rows`` holds only rows under the keys of planned requests, by store; once the
    run has generated, it reads the stores again (what was generated is then there)."""
    from longctx.reader import Reader
    from longctx.requests import Request, request_key
    from longctx.runner import Block, block_keys

    reader = Reader()
    asked = [Request("t", f"e{i}", f"prompt {i}", ("x",), {"n": i}) for i in range(2)]
    block = Block("b", "exp", asked, True)
    keys = block_keys(block, reader)

    def row(key, req):
        return stored_row(
            key,
            example_id=req.example_id,
            prompt=req.prompt,
            condition=req.condition,
            model=reader.model,
            fingerprint=reader.fingerprint,
        )

    unplanned = Request("t", "e9", "prompt 9", ("x",), {"n": 9})
    store = reader.store(tmp_path, "exp")
    store.append(
        [
            row(keys[0], asked[0]),
            row(request_key(reader.fingerprint, unplanned, reader.prompt_mode), unplanned),
        ]
    )
    run = Run.of(_Probe([block]), reader, results=tmp_path)
    assert [r["key"] for r in run.rows("exp")] == [keys[0]]
    assert run.rows("other") == []
    store.append([row(keys[1], asked[1])])
    assert len(run.rows("exp")) == 1  # read once per run
    assert len(run.answered()) == 2  # all stored: nothing generated
    assert len(run.rows("exp")) == 2


def test_no_function_in_the_library_is_over_80_lines():
    """Long functions were split by what they do (a chapter's quoted numbers by section, a
    run by its steps); this keeps new ones from growing back."""
    root = Path(__file__).resolve().parents[1] / "lib" / "longctx"
    long = [
        f"{path.relative_to(root)}:{node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in root.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > 80
    ]
    assert not long, long


def test_a_plan_without_a_reader_is_built_once_for_every_reader_of_a_process(monkeypatch):
    """Findings over several readers built each chapter's plan once per reader, though a
    plan that asks nothing of its reader is the same for all: runs with the same parameters
    share it; a plan sized in the reader's tokens (it asks for the tokenizer) is never
    shared."""
    import sys

    from longctx.reader import Reader

    contract_module = sys.modules[Run.__module__]  # the package's contract() shadows its name
    monkeypatch.setattr(contract_module, "load_tokenizer", lambda model: f"tokenizer of {model}")
    models = ("qwen2.5-coder-0.5b-instruct", "smollm2-135m-instruct")
    free, sized = _Probe(), _Probe(sized=True)
    for model in models:
        Run.of(free, Reader(model), n=11).planned()
        Run.of(sized, Reader(model), n=12).planned()
    assert free.built == [11] and sized.built == [12, 12]
    run = Run.of(sized, Reader(models[1]), n=12)
    run.planned()
    assert run.tokenizer() == f"tokenizer of {models[1]}"


def test_findings_the_matrix_and_reproduce_load_no_chapters_sections():
    """A chapter's tables and figures (its ``sections``) are the page's alone: discovering
    every chapter, as findings, the matrix and ``longctx reproduce`` do, loads its class,
    design and numbers but no ``sections`` module (discovery imports by name, which
    ``lint-imports`` cannot follow, so this checks the running process)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "import longctx.findings, longctx.matrix, longctx.reproduce\n"
        "from longctx.chapters import contracts\n"
        "assert len(contracts()) >= 7\n"
        "print(sorted(m for m in sys.modules if m.endswith('.sections')))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_every_chapter_is_a_package_of_one_shape_and_no_module_is_over_700_lines():
    """Each chapter is ``__init__`` (its class), ``design``, ``numbers`` and ``sections``
    (beside a method of its own where it has one), and no module of ``chapters/`` grows
    past 700 lines."""
    from longctx.chapters import contracts

    root = Path(__file__).resolve().parents[1] / "lib" / "longctx" / "chapters"
    for name, chapter in contracts().items():
        folder = Path(chapter.module.__file__).parent
        assert folder.name == name and {"design.py", "numbers.py", "sections.py"} <= {
            p.name for p in folder.glob("*.py")
        }, name
    long = {
        str(p.relative_to(root)): n
        for p in root.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 700
    }
    assert not long, long


def test_a_chain_of_stages_is_read_back_from_the_store_its_last_stage_writes(tmp_path):
    """A block whose second stage has a stage of its own declares every store the chain
    writes to; the rows of the last stage are then found from the first block alone."""
    from longctx.requests import Request
    from longctx.runner import Block, stored_in

    def ask(name):
        return [Request("t", f"{name}0", f"prompt {name}", ("a",), {"stage": name})]

    def third(rows):
        return Block("third", "c", ask("c"))

    def second(rows):
        return Block("second", "b", ask("b"), followup=third, followup_experiment="c")

    first = Block("first", "a", ask("a"), True, second, followup_experiment=("b", "c"))
    run([first], Reader(MODEL), tmp_path, load=_AnsweringLM, progress=False, log=lambda _: None)
    rows = stored_in([first], "c", Reader(MODEL), tmp_path)
    assert [r["condition"]["stage"] for r in rows] == ["c"]
    assert first.writes_to("b") and first.writes_to("c") and not first.writes_to("d")
