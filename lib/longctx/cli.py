"""Command line: ``longctx run NOTEBOOK --model M`` executes a chapter for any model.

The jupytext ``.py`` notebook is converted in memory, executed by papermill with
``model=M`` (plus any ``-p name value`` overrides, values parsed as Python/JSON
literals), and the executed copy is written beside that model's results:
``data/results/<model slug>/<notebook stem>/<notebook stem>.ipynb``. Generations
are cached, so rerunning after an interruption resumes.
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
import os
import sys
from pathlib import Path

from .chapters import PAGE_PARAMETERS, check_params, generation_options, overrides_mapping, scale
from .chapters import chapters as all_chapters
from .chapters.effective_length.numbers import lengths_lines
from .claims import read_claims
from .errors import DataFileError, LongctxError, ParameterError
from .export import SCHEMA as EXPORT_SCHEMA
from .export import write_every_eval_ever
from .findings import bounds_lines, effective_lengths, length_bounds_table
from .floor import (
    FLOOR_MAX_PROMPT_TOKENS,
    FLOOR_PROMPTS,
    dtype_groups,
    floor_report,
    floor_sample,
    floor_summary,
    partial_path,
    replay_resumably,
    report_path,
)
from .matrix import build as build_matrix
from .matrix import (
    claim_experiments,
    column_of,
    cost_table,
    markdown_table,
    model_backends,
    reader_lines,
)
from .matrix import frame as matrix_frame
from .models import describe_aliases, resolve_model
from .paths import repo_root, resolve
from .reader import Reader
from .replay import check_replayable, reader_of, replay, row_scorer, sample_rows
from .reproduce import chapter_blocks, claims_plan, measured_speed, write_claims_plan
from .runner import PromptTokens, merge_copy, run
from .store import ResultsStore

# Exit codes: 0 done, 1 a notebook failed, 2 a one-line error, 3 a run that stopped (deadline)
# with planned rows still missing: run the same command again to go on.
ROWS_MISSING = 3


def _literal(text: str, name: str):
    """A parameter's value: a Python literal where the text is one, else the text itself
    (so ``-p source release`` needs no quotes); text that opens a list, mapping, tuple or
    string and does not close it is an error, not a word."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        if text.strip()[:1] and text.strip()[0] in "[{(\"'":
            raise ParameterError(
                f"{name} {text!r} is not a valid value: close its brackets or quotes"
            ) from None
        return text


def _at_least(flag: str, value, least) -> None:
    if value is not None and value < least:
        raise ParameterError(f"{flag} must be at least {least}, not {value}")


def run_notebook(
    notebook: str | Path,
    model: str,
    params: dict | None = None,
    results_dir: str | Path | None = None,
    output: str | Path | None = None,
    progress: bool = True,
) -> Path:
    import jupytext
    import papermill

    nb_path = Path(notebook)
    if not nb_path.exists():
        raise LongctxError(f"notebook '{notebook}' does not exist")
    # Fail fast on an unknown model, backend, server option or parameter, or a parameter the
    # chapter cannot use, before starting a kernel.
    nb = jupytext.read(nb_path)
    params = check_notebook_params(nb_path.stem, nb, params or {})
    reader = Reader.from_notebook({**params, "model": model})
    root = repo_root(nb_path.parent)
    params = {"model": model, **params}
    # `-p results_dir X` and `--results-dir X` mean the same: results and executed notebook go to X.
    results = resolve(results_dir or params.get("results_dir") or "data/results", root)
    if results_dir or "results_dir" in params:
        params["results_dir"] = str(results)
    out = (
        Path(output)
        if output
        else results / reader.results_folder(results) / nb_path.stem / f"{nb_path.stem}.ipynb"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    staged = out.with_suffix(".input.ipynb")
    running = out.with_suffix(".running.ipynb")
    try:
        jupytext.write(nb, staged, fmt="ipynb")
    except OSError:
        staged.unlink(missing_ok=True)  # no partial input notebook is left behind
        raise
    kernel_log = out.with_suffix(".kernel.log")
    quiet_page_parameters()
    try:
        with open(kernel_log, "wb") as log:
            papermill.execute_notebook(
                str(staged),
                str(running),
                parameters=params,
                cwd=str(nb_path.parent.resolve()),
                kernel_name="python3",
                progress_bar=progress,
                kernel_manager_class=logged_kernel(log),
            )
    except BaseException:
        # Keep the last good executed notebook; leave the failed one beside it for debugging.
        if running.exists():
            running.replace(out.with_suffix(".failed.ipynb"))
        raise
    finally:
        staged.unlink(missing_ok=True)
    running.replace(out)
    out.with_suffix(".failed.ipynb").unlink(missing_ok=True)  # an earlier failure, now mended
    return out


def quiet_page_parameters() -> None:
    """Drop papermill's warning for a page parameter the cell leaves out (:func:`checked_above`),
    once however often it is asked."""
    papermill_log = logging.getLogger("papermill")
    if checked_above not in papermill_log.filters:
        papermill_log.addFilter(checked_above)


def checked_above(record: logging.LogRecord) -> bool:
    """papermill warns of each parameter its cell does not assign; a page parameter its cell
    leaves out is one every chapter page takes, and :func:`check_notebook_params` has already
    refused any other name, so that warning says nothing."""
    return not record.getMessage().startswith("Passed unknown parameter")


def logged_kernel(log):
    """A kernel manager whose kernel writes its own stderr to ``log`` (an open file): its
    start-up warnings, and the traceback a kernel prints when Ctrl-C closes its sockets while
    a cell runs, stay out of the terminal (the cells' own output reaches the notebook as
    always), so an interrupted run ends in one line."""
    from jupyter_client.manager import AsyncKernelManager

    class LoggedKernelManager(AsyncKernelManager):
        async def _async_launch_kernel(self, kernel_cmd, **kw):
            kw["stderr"] = log
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return LoggedKernelManager


def check_notebook_params(stem: str, nb, params: dict) -> dict:
    """The notebook's parameters with ``params`` applied, refused in one line where papermill
    would only warn and run on: a name neither the parameter cell, the page parameters every
    chapter page takes (:data:`~longctx.chapters.PAGE_PARAMETERS`) nor the chapter declares, a
    results folder that is not a path, and any value the chapter's scales or its own check
    refuse (:func:`longctx.chapters.check_params`). A chapter parameter named on its own
    (``-p num_pairs '[75]'``) joins the cell's ``params`` mapping of overrides."""
    cell = next((c for c in nb.cells if "parameters" in c.metadata.get("tags", [])), None)
    declared = {
        t.id
        for node in (ast.parse(cell.source).body if cell else [])
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    chapter = stem in all_chapters()
    declared |= set(PAGE_PARAMETERS) if chapter else set()
    own = set(scale(stem, "book")) if chapter else set()
    unknown = sorted(set(params) - declared - own)
    if unknown:
        names = ", ".join(sorted(declared - {"params"}) + sorted(own))
        raise ParameterError(
            f"{stem} has no parameter {', '.join(unknown)}; its parameters: {names}"
        )
    generation_options(params)
    if "results_dir" in params and not isinstance(params["results_dir"], str):
        raise ParameterError(f"results_dir must be a folder path, not {params['results_dir']!r}")
    given = overrides_mapping(stem, params.get("params"))
    cell_params = {k: v for k, v in params.items() if k not in own}
    if chapter:
        overrides = {**given, **{k: v for k, v in params.items() if k in own}}
        check_params(stem, overrides, params.get("scale", "book"))
        if overrides:
            cell_params["params"] = overrides
    return cell_params


def _reproduce(args) -> int:
    chapters = args.chapters or list(all_chapters())
    overrides: dict = {}
    for name, value in args.set:
        chapter, _, param = name.partition(".")
        if chapter not in chapters or not param:
            raise ParameterError(f"--set {name}: use CHAPTER.PARAM with a chapter among {chapters}")
        overrides.setdefault(chapter, {})[param] = _literal(value, f"--set {name}")
    default = next((s for s in args.scale if ":" not in s), "book")
    _at_least("--chunk-prompts", args.chunk_prompts, 1)
    _at_least("--batch-size", args.batch_size, 1)
    _at_least("--token-budget", args.token_budget, 1)
    _at_least("--deadline-s", args.deadline_s, 0)
    per_chapter = dict(s.split(":", 1) for s in args.scale if ":" in s)
    reader = _reader(args)
    root = resolve(args.results_dir or "data/results")
    blocks = chapter_blocks(
        chapters,
        default,
        overrides,
        per_chapter,
        reader=reader,
        results=root,
        dry_run=args.dry_run,
        only=args.only,
    )
    claims_scale = default == "claims" and not per_chapter and not overrides and not args.only
    counter, speed, speed_words = None, None, ""
    if args.dry_run and (args.count_tokens or claims_scale):
        counter = PromptTokens(reader)
        speed, speed_words = measured_speed(reader)
        print(f"prompt tokens counted with {reader.model}'s tokenizer; times at {speed_words}")
    report = run(
        blocks,
        reader,
        root,
        batch_size=args.batch_size,
        token_budget=args.token_budget,
        deadline_s=args.deadline_s,
        chunk_prompts=args.chunk_prompts,
        copy_to=args.copy_to,
        dry_run=args.dry_run,
        progress=False,
        count_tokens=counter,
        speed=speed,
    )
    print(report.summary())
    if claims_scale and counter is not None:
        # What each claim costs this reader, for the findings matrix (a full dry run only).
        plan = claims_plan(report, chapters, reader, speed_words)
        print(f"wrote {write_claims_plan(plan, root / reader.results_folder(root))}")
    return 0 if args.dry_run or report.complete else ROWS_MISSING


def _findings(args) -> int:
    root = resolve(args.results_dir or "data/results")
    if args.costs:
        print(markdown_table(cost_table(root)))
        return 0
    only = None
    if args.model:
        options = {}
        if args.backend == "openai":  # rows are read; no server is reached
            options = {"url": "http://rows-only.invalid/v1", "served_model": args.served_model}
        backends = [args.backend] if args.backend else model_backends(root, args.model) or ["hf"]
        only = [column_of(Reader.of(args.model, b, **options), root) for b in backends]
    table = build_matrix(root, only=only)
    if not table.columns:
        raise DataFileError(f"no reader has rows under {root}; name one with --model")
    print("\n".join(reader_lines(table)))
    if args.model:
        readers = [c.reader for c in only]
        lengths = effective_lengths(root, readers)
        print("\n".join(lengths_lines(lengths)) or "effective length: no rows of the sweep yet")
        print("\n".join(bounds_lines(length_bounds_table(root, readers))))
        print(
            "what each claim costs and whether it fits this reader's window: "
            f"longctx reproduce --scale claims --model {args.model} "
            f"--backend {args.backend or 'hf'} --dry-run"
        )
    if args.csv:
        matrix_frame(table).to_csv(args.csv, index=False)
        print(f"wrote {args.csv}")
    return 0


def _export(args) -> int:
    root = resolve(args.results_dir or "data/results")
    table = build_matrix(root)
    if not table.columns:
        raise DataFileError(f"no reader has rows under {root}: nothing to export")
    for path in write_every_eval_ever(table, root, args.out):
        print(f"wrote {path}")
    return 0


def _reader(args, **given) -> Reader:
    """The reader a command's backend and server options name (see :func:`_backend_arguments`);
    ``given`` replaces any of them (replay takes the model and backend from the rows)."""
    model = given.pop("model") if "model" in given else args.model
    return Reader.of(model, **{**reader_options(args), **given})


# The flags that say how to reach a model (see _backend_arguments and _server_arguments), by
# the names Reader.of takes: a command's reader and a notebook's reader_options are built alike.
READER_FLAGS = (
    "backend",
    "url",
    "served_model",
    "concurrency",
    "timeout_s",
    "retries",
    "context_window",
    "device",
    "dtype",
    "prompt_mode",
)


def reader_options(args) -> dict:
    """The reader options a command's flags set (those left unset are left out)."""
    return {
        name: value for name in READER_FLAGS if (value := getattr(args, name, None)) is not None
    }


def _pack(args) -> int:
    root = resolve(args.results_dir or "data/results")
    moved, skipped = 0, []
    for store in ResultsStore.all_under(root):
        try:
            n = store.pack()
        except DataFileError as err:  # one damaged store does not stop the others
            print(f"longctx: skipped {store.dir.relative_to(root)}: {err}", file=sys.stderr)
            skipped.append(store)
            continue
        if n:
            print(f"{store.dir.relative_to(root)}: {n} rows packed")
        moved += n
    print(f"{moved} rows packed into {ResultsStore.PACKED} files under {root}")
    if skipped:
        print(f"longctx: {len(skipped)} store(s) not packed: see above", file=sys.stderr)
        return 2
    return 0


def _merge(args) -> int:
    root = resolve(args.results_dir or "data/results")
    for source in args.files:
        where, added, packed = merge_copy(root, source, pack=args.pack)
        print(
            f"{source}: {added} new rows into {where}"
            + (f" ({packed} packed)" if args.pack else "")
        )
    return 0


def _replay(args) -> int:
    path = Path(args.results)
    if not path.is_file():
        raise DataFileError(
            f"{path} is not a results file (data/results/<model>/<experiment>/generations.jsonl"
            f" or {ResultsStore.PACKED})"
        )
    rows = ResultsStore.at(path).rows()
    if args.created_before:  # e.g. only the rows another machine made, before this one joined
        rows = [r for r in rows if r.get("created", "") < args.created_before]
        if not rows:
            raise DataFileError(f"no row of {path} was created before {args.created_before}")
    _at_least("--batch-size", args.batch_size, 1)
    sample = sample_rows(rows, args.n, args.seed)
    check_replayable(sample, str(path))
    model, backend = reader_of(sample)
    if resolve_model(model).fingerprint != sample[0]["model_fingerprint"]:
        raise DataFileError(
            f"'{model}' here is not the weights that wrote {path} "
            f"({sample[0]['model_fingerprint']}); replaying would compare two models"
        )
    # hf rows replay in the dtype they were made in unless asked otherwise (auto picks per machine).
    made_in = sorted({r["params"].get("dtype") for r in sample} - {None}) if backend == "hf" else []
    stored_dtype = ", ".join(made_in) or None
    dtype = made_in[0] if args.dtype == "auto" and len(made_in) == 1 else args.dtype
    scorer = row_scorer(sample)
    # An openai row's identity names the model id the server served (openai:<served model>).
    served = args.served_model or sample[0].get("backend", "").partition(":")[2] or None
    lm = _reader(args, model=model, backend=backend, served_model=served, dtype=dtype).load()
    result = replay(sample, lm, batch_size=args.batch_size)
    report = result.report(
        scorer,
        results=str(path),
        rows_stored=len(rows),
        created_before=args.created_before,
        seed=args.seed,
        stored_dtype=stored_dtype,
    )
    summary = report["summary"]
    print(
        f"{path}: {len(sample)} of {len(rows)} rows replayed with {model} ({backend}) on {report['machine']['cpu']}: "
        f"{summary['identical']:.1%} identical outputs"
        + (
            f"; accuracy stored {summary['accuracy_stored']:.1%}, replayed {summary['accuracy_replayed']:.1%}"
            if "accuracy_stored" in summary
            else ""
        )
    )
    for a, b in result.changed():
        print(
            f"  {a['example_id']}: stored {a['output'][:70]!r}\n"
            f"  {'':{len(a['example_id'])}}  here   {b['output'][:70]!r}"
        )
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    return 0


def _server_arguments(parser) -> None:
    """How the ``openai`` backend talks to its server (left unset, :class:`~longctx.backends.openai.OpenAIOptions`'s
    defaults hold)."""
    parser.add_argument(
        "--url", default=None, help="server URL for --backend openai, e.g. http://127.0.0.1:8000/v1"
    )
    parser.add_argument(
        "--served-model", default=None, help="the model id the server serves (default: --model)"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="requests in flight for --backend openai (8; use 1 for a server that serves one "
        "request at a time, such as llama.cpp's without --interrupt_requests False)",
    )
    parser.add_argument(
        "--timeout",
        dest="timeout_s",
        type=float,
        default=None,
        help="seconds to wait for the server's next bytes before trying again (120)",
    )
    parser.add_argument(
        "--retries",
        type=int,
        default=None,
        help="tries after a connection error, timeout, 429 or 5xx before the run stops (3)",
    )
    parser.add_argument(
        "--context-window",
        type=int,
        default=None,
        help="the server's context window in tokens, where it does not say (llama-cpp-python)",
    )


def _backend_arguments(parser) -> None:
    parser.add_argument(
        "--backend",
        default="hf",
        help="hf (transformers), llamacpp (GGUF in process) or openai "
        "(an OpenAI-compatible server at --url)",
    )
    _server_arguments(parser)
    parser.add_argument("--device", default="auto", help="hf only: auto, cpu or cuda[:N]")
    parser.add_argument(
        "--dtype", default="auto", help="hf only: auto, bfloat16, float16 or float32"
    )


def _run_parser(sub) -> None:
    """``longctx run``: a chapter notebook for a model, with papermill."""
    run = sub.add_parser(
        "run",
        help="execute a chapter notebook for a model with papermill",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="every chapter page's parameters (-p NAME VALUE):\n"
        + "\n".join(
            f"  {name:<15} {means}" for name, means in PAGE_PARAMETERS.items() if name != "model"
        )
        + "\nand any parameter of the chapter's scales, which joins params",
    )
    run.add_argument("notebook", help="path to a notebooks/*.py chapter")
    run.add_argument("--model", required=True, help="alias, .gguf path, checkpoint dir or hub id")
    run.add_argument(
        "-p",
        "--param",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="set a page parameter (listed below) or one of the chapter's own (value parsed as "
        "a Python literal)",
    )
    run.add_argument("--results-dir", help="results root (default data/results in the repository)")
    run.add_argument(
        "--backend",
        default=None,
        help="hf (default), llamacpp or openai (the flags that say how to reach the model set "
        "the notebook's reader_options)",
    )
    _server_arguments(run)
    run.add_argument("--device", default=None, help="hf only: auto, cpu or cuda[:N]")
    run.add_argument("--dtype", default=None, help="hf only: auto, bfloat16, float16 or float32")
    run.add_argument(
        "--prompt-mode", default=None, help="auto, chat (the chat template) or raw (plain text)"
    )
    run.add_argument("--output", help="where to write the executed notebook")


def _reproduce_parser(sub) -> None:
    """``longctx reproduce``: chapters' rows at a named scale."""
    rep = sub.add_parser(
        "reproduce", help="generate chapters' rows at a named scale (headline first, resumable)"
    )
    rep.add_argument("--chapters", nargs="+", default=None, help="default: every chapter")
    rep.add_argument(
        "--scale",
        nargs="+",
        default=["book"],
        metavar="SCALE",
        help="a parameter set in lib/longctx/scales/<chapter>.json for every chapter, and/or "
        "CHAPTER:SCALE for one (e.g. --scale book kv_retrieval:paper)",
    )
    rep.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    rep.add_argument(
        "--set",
        nargs=2,
        action="append",
        default=[],
        metavar=("CHAPTER.PARAM", "VALUE"),
        help="override one parameter of a chapter's scale (value parsed as a Python literal)",
    )
    rep.add_argument("--batch-size", type=int, default=8)
    rep.add_argument(
        "--token-budget",
        type=int,
        default=None,
        help="rows x tokens per batch (long prompts batch less)",
    )
    rep.add_argument(
        "--deadline-s", type=float, default=None, help="start no new chunk after this many seconds"
    )
    rep.add_argument(
        "--chunk-prompts",
        type=int,
        default=256,
        help="prompts per chunk; the deadline is checked between chunks, so lower this where one "
        "prompt takes a minute (long contexts on a CPU)",
    )
    rep.add_argument(
        "--copy-to",
        default=None,
        help="copy the rows this run adds here, one <model>__<experiment>.jsonl.xz per store, at most "
        "once a minute and when the run stops (take them back with `longctx merge`)",
    )
    rep.add_argument(
        "--only",
        nargs="+",
        default=None,
        metavar="TEXT",
        help="run only the blocks whose name contains one of these strings",
    )
    _backend_arguments(rep)
    rep.add_argument("--results-dir", default=None)
    rep.add_argument(
        "--dry-run", action="store_true", help="count stored and missing rows; generate nothing"
    )
    rep.add_argument(
        "--count-tokens",
        action="store_true",
        help="with --dry-run: count each block's prompt tokens with the reader's tokenizer and "
        "estimate its time from scripts/bench_readers.py's measure (always on at --scale claims, "
        "which also writes data/results/<reader>/claims-plan.json)",
    )


def _store_parsers(sub) -> None:
    """``longctx pack`` and ``longctx merge``: the stores' packed rows."""
    pk = sub.add_parser(
        "pack", help="move appended rows into each store's packed generations.jsonl.xz"
    )
    pk.add_argument("--results-dir", default=None)
    mg = sub.add_parser(
        "merge", help="add the rows of flat copies (reproduce --copy-to) to the stores, then pack"
    )
    mg.add_argument("files", nargs="+", help="<model>__<experiment>.jsonl.xz files")
    mg.add_argument("--results-dir", default=None)
    mg.add_argument(
        "--no-pack", dest="pack", action="store_false", help="leave the merged rows unpacked"
    )


def _findings_parser(sub) -> None:
    """``longctx findings``: every claim on a reader's rows."""
    fi = sub.add_parser(
        "findings",
        help="every paper claim judged on a reader's rows (or on every reader with rows)",
    )
    fi.add_argument(
        "--model", default=None, help="the reader's model (default: every reader with rows)"
    )
    fi.add_argument(
        "--backend",
        default=None,
        help="the reader's backend: hf, llamacpp, openai (default: every backend of --model "
        "with rows, its replications side by side)",
    )
    fi.add_argument("--served-model", default=None, help="openai: the model id the server served")
    fi.add_argument("--csv", default=None, help="also write one line per claim and reader here")
    fi.add_argument(
        "--costs",
        action="store_true",
        help="print instead what every claim costs each reader with a claims plan (Markdown)",
    )
    fi.add_argument("--results-dir", default=None)


def _export_parser(sub) -> None:
    """``longctx export``: every reader's claims and rows in a shared schema."""
    ex = sub.add_parser(
        "export",
        help="write every reader's judged claims and scored rows as Every Eval Ever 0.3.0 records",
    )
    ex.add_argument(
        "--schema",
        choices=[EXPORT_SCHEMA],
        default=EXPORT_SCHEMA,
        help="the schema to write (validated against its vendored files)",
    )
    ex.add_argument("--out", default="export", help="folder for the records (default: export)")
    ex.add_argument("--results-dir", default=None)


def _replay_parser(sub) -> None:
    """``longctx replay``: stored rows answered again on this machine."""
    rp = sub.add_parser(
        "replay", help="answer a seeded sample of stored rows again on this machine and compare"
    )
    rp.add_argument(
        "results", help="a results file, data/results/<model>/<experiment>/generations.jsonl[.xz]"
    )
    rp.add_argument("--n", type=int, default=16, help="rows to replay")
    rp.add_argument("--seed", type=int, default=0, help="seed of the sample")
    rp.add_argument("--json", default=None, help="write the report (every replayed answer) here")
    rp.add_argument(
        "--created-before",
        default=None,
        metavar="DATE",
        help="sample only rows created before this ISO date (e.g. 2026-11-25: another machine's rows)",
    )
    rp.add_argument("--batch-size", type=int, default=8)
    _server_arguments(rp)
    rp.add_argument("--device", default="auto", help="hf only: auto, cpu or cuda[:N]")
    rp.add_argument(
        "--dtype",
        default="auto",
        help="hf only: bfloat16, float16 or float32 (default: the rows' own)",
    )


def _floor_parser(sub) -> None:
    """``longctx floor``: the numerics floor of one reader."""
    fl = sub.add_parser(
        "floor",
        help="answer a fixed sample of a reader's claims-scale rows again in another batch "
        "composition: the share of answers and scores that change",
    )
    fl.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    fl.add_argument("--n", type=int, default=FLOOR_PROMPTS, help="answers to ask again")
    fl.add_argument(
        "--max-prompt-tokens",
        type=int,
        default=FLOOR_MAX_PROMPT_TOKENS,
        help="leave out longer prompts (a CPU's budget)",
    )
    fl.add_argument(
        "--batch-size", type=int, default=3, help="another batch size than the rows were made in"
    )
    fl.add_argument("--results-dir", default=None)
    fl.add_argument(
        "--json", default=None, help="the report (default data/bench/floor-<reader>.json)"
    )
    _backend_arguments(fl)


def _floor(args) -> int:
    _at_least("--batch-size", args.batch_size, 1)
    results_dir = resolve(args.results_dir or "data/results")
    reader = _reader(args)
    experiments = claim_experiments(read_claims())
    sample, eligible = floor_sample(
        results_dir, reader, experiments, args.n, args.max_prompt_tokens
    )
    folder = reader.results_folder(results_dir)
    check_replayable(sample, folder)
    out = resolve(args.json or report_path(folder))
    result = replay_resumably(
        dtype_groups(sample, reader.backend.name, args.dtype),
        lambda dtype: _reader(args, dtype=dtype).load(),
        partial_path(out),
        batch_size=args.batch_size,
    )
    report = floor_report(result, folder=folder, eligible=eligible, batch_size=args.batch_size)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    partial_path(out).unlink(missing_ok=True)
    s = floor_summary(report)
    print(
        f"{folder}: {s['answers_changed']} of {s['n']} answers changed in another batch "
        f"composition, {s['scores_changed']} of {s['scored']} scores; report: {out}"
    )
    return 0


def _models(args) -> int:
    print(describe_aliases())
    return 0


def _run(args) -> int:
    params = {k: _literal(v, f"-p {k}") for k, v in args.param}
    if flags := reader_options(args):  # the flags win over a -p reader_options they share
        params["reader_options"] = {**(params.get("reader_options") or {}), **flags}
    out = run_notebook(args.notebook, args.model, params, args.results_dir, args.output)
    print(f"executed notebook: {out}")
    return 0


COMMANDS = {
    "run": _run,
    "models": _models,
    "reproduce": _reproduce,
    "pack": _pack,
    "merge": _merge,
    "findings": _findings,
    "export": _export,
    "replay": _replay,
    "floor": _floor,
}


def build_parser() -> argparse.ArgumentParser:
    """Every subcommand's arguments (:data:`COMMANDS` runs each)."""
    parser = argparse.ArgumentParser(prog="longctx", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    _run_parser(sub)
    sub.add_parser("models", help="list model aliases")
    _reproduce_parser(sub)
    _store_parsers(sub)
    _findings_parser(sub)
    _export_parser(sub)
    _replay_parser(sub)
    _floor_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except LongctxError as err:
        print(f"longctx: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "longctx: interrupted; every row written so far is kept: the same command resumes",
            file=sys.stderr,
        )
        sys.stdout.flush()
        sys.stderr.flush()
        # Every row is on disk (each batch is fsynced) and copies were flushed on the way up;
        # exiting now spares waiting on a request a hung server holds open in another thread.
        os._exit(130)
    except OSError as err:  # a full disk or a read-only folder outside the stores' own writes
        where = f" ({err.filename})" if getattr(err, "filename", None) else ""
        print(
            f"longctx: error: {err.strerror or err}{where}; free some disk space or check the "
            "folder's permissions, then run again (rows written so far are kept)",
            file=sys.stderr,
        )
        return 2
    except Exception as err:  # papermill wraps notebook errors; show the one line that matters
        name = type(err).__name__
        if name == "PapermillExecutionError":
            print(f"longctx: error in notebook: {err.ename}: {err.evalue}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
