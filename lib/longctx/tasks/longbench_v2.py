"""LongBench-v2 (Bai et al., 2024): 503 four-way multiple-choice questions over long contexts.

Used by the C-NORM paper (section 5.2, Table 1) in two settings: **Base** (the full
context, cut to the prompt budget) and **RAG** (the top retrieved chunks). This
module follows the official LongBench-v2 evaluation code:

* prompts: the official zero-shot templates (``0shot.txt``, ``0shot_rag.txt``),
  kept as data files ``longbench_v2.prompt`` / ``longbench_v2_rag.prompt``;
* over-long prompts are cut in the middle: the first and last ``max_len // 2``
  tokens are kept (:func:`truncate_middle`);
* RAG context: the top-k ``retrieved_context`` chunks, put back in document order
  (``c_idx``), as ``Retrieved chunk i: <content>`` joined by blank lines;
* answer extraction (:func:`extract_answer`): drop ``*``, then the first match of
  ``The correct answer is \\(([A-D])\\)``, else ``The correct answer is ([A-D])``,
  else no answer (scored wrong);
* breakdowns: difficulty (easy / hard) and length (short / medium / long).

The data (``THUDM/LongBench-v2`` on the Hugging Face hub, or its ``data.json``)
cannot be fetched offline; :func:`load` reads a local copy or the hub.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..errors import DataFileError, ParameterError
from ..formats import format_passages
from ..prompts import load_prompt
from ..requests import Request, StopRule

TASK = "longbench_v2"
HUB_ID = "THUDM/LongBench-v2"
CHOICES = ("A", "B", "C", "D")
DIFFICULTIES = ("easy", "hard")
LENGTHS = ("short", "medium", "long")
MAX_NEW_TOKENS = 128  # the official setting without chain of thought
_FIELDS = (
    "_id",
    "difficulty",
    "length",
    "question",
    "choice_A",
    "choice_B",
    "choice_C",
    "choice_D",
    "answer",
    "context",
)


@dataclass(frozen=True)
class LongBenchExample:
    example_id: str
    domain: str
    sub_domain: str
    difficulty: str
    length: str
    question: str
    choices: tuple[str, str, str, str]
    answer: str
    context: str
    retrieved: tuple[dict, ...] = field(default=(), compare=False)

    def __post_init__(self):
        if self.answer not in CHOICES:
            raise ParameterError(
                f"{self.example_id}: answer must be one of A-D, got {self.answer!r}"
            )
        if self.difficulty not in DIFFICULTIES or self.length not in LENGTHS:
            raise ParameterError(
                f"{self.example_id}: difficulty {self.difficulty!r} / length {self.length!r} "
                f"not in {DIFFICULTIES} / {LENGTHS}"
            )


def _example(rec: dict) -> LongBenchExample:
    missing = [f for f in _FIELDS if f not in rec]
    if missing:
        raise DataFileError(f"LongBench-v2 record {rec.get('_id', '?')} lacks {', '.join(missing)}")
    return LongBenchExample(
        example_id=str(rec["_id"]),
        domain=rec.get("domain", ""),
        sub_domain=rec.get("sub_domain", ""),
        difficulty=rec["difficulty"],
        length=rec["length"],
        question=rec["question"],
        choices=tuple(rec[f"choice_{c}"] for c in CHOICES),
        answer=rec["answer"],
        context=rec["context"],
        retrieved=tuple(rec.get("retrieved_context") or ()),
    )


def read_file(path: str | Path, limit: int | None = None) -> list[LongBenchExample]:
    """Read the official ``data.json`` (a JSON list) or a JSONL file of the same records."""
    path = Path(path)
    if not path.exists():
        raise DataFileError(
            f"{path} does not exist; download data.json from the {HUB_ID} dataset on the hub"
        )
    text = path.read_text(encoding="utf-8")
    try:
        records = (
            json.loads(text)
            if text.lstrip().startswith("[")
            else [json.loads(line) for line in text.splitlines() if line.strip()]
        )
    except json.JSONDecodeError as err:
        raise DataFileError(f"{path} is neither a JSON list nor JSONL ({err})") from None
    return [_example(r) for r in records[:limit]]


def load(source: str | Path = HUB_ID, limit: int | None = None) -> list[LongBenchExample]:
    """A local ``data.json``/JSONL path, or a hub dataset id (needs network and ``datasets``)."""
    if Path(source).exists():
        return read_file(source, limit)
    try:
        from datasets import load_dataset

        ds = load_dataset(str(source), split="train")
    except Exception as err:  # offline, unknown id, ...
        raise DataFileError(
            f"could not load LongBench-v2 from {source!r} ({type(err).__name__}: "
            f"{str(err).splitlines()[0] if str(err) else ''}); pass the path of a local data.json"
        ) from None
    return [_example(dict(r)) for r in ds.select(range(min(limit or len(ds), len(ds))))]


def extract_answer(response: str) -> str | None:
    """The official extraction: strip ``*``; "The correct answer is (X)", else "... is X"."""
    response = response.replace("*", "")
    match = re.search(r"The correct answer is \(([A-D])\)", response)
    if match:
        return match.group(1)
    match = re.search(r"The correct answer is ([A-D])", response)
    return match.group(1) if match else None


def truncate_middle(ids: Sequence[int], max_len: int) -> list[int]:
    """Keep the first and last ``max_len // 2`` tokens when ``ids`` is longer than ``max_len``."""
    if max_len < 2:
        raise ParameterError(f"max_len must be >= 2, got {max_len}")
    ids = list(ids)
    if len(ids) <= max_len:
        return ids
    half = max_len // 2
    return ids[:half] + ids[-half:]


def rag_context(example: LongBenchExample, top_k: int) -> str:
    """The top-k retrieved chunks in document order, as the official RAG setting builds them."""
    if top_k < 1:
        raise ParameterError(f"top_k must be >= 1, got {top_k}")
    if not example.retrieved:
        raise DataFileError(
            f"{example.example_id} has no retrieved_context; the RAG setting needs it"
        )
    chunks = sorted(example.retrieved[:top_k], key=lambda c: c.get("c_idx", 0))
    return "\n\n".join(f"Retrieved chunk {i + 1}: {c['content']}" for i, c in enumerate(chunks))


def build_prompt(example: LongBenchExample, context: str, rag: bool = False) -> str:
    template = load_prompt("longbench_v2_rag" if rag else "longbench_v2")
    return template.format(
        context=context.strip(),
        question=example.question.strip(),
        **{f"choice_{c}": x.strip() for c, x in zip(CHOICES, example.choices)},
    )


def make_requests(
    examples: Sequence[LongBenchExample],
    *,
    setting: str = "base",
    top_k: int = 4,
    tokenizer=None,
    max_prompt_tokens: int | None = None,
    delimiter: str | None = None,
    ratio: float = 0.5,
    seed: int = 0,
    method: str = "baseline",
) -> list[Request]:
    """One request per example. ``setting``: ``base`` (full context) or ``rag`` (top-k chunks).
    With ``tokenizer`` and ``max_prompt_tokens`` the prompt is cut in the middle as the
    official code does. ``delimiter``: C-NORM formatting of the context at ``ratio``."""
    if setting not in ("base", "rag"):
        raise ParameterError(f"setting must be 'base' or 'rag', got {setting!r}")
    if (tokenizer is None) != (max_prompt_tokens is None):
        raise ParameterError("truncation needs both tokenizer and max_prompt_tokens")
    out = []
    for ex in examples:
        context = rag_context(ex, top_k) if setting == "rag" else ex.context
        context = format_passages([context], delimiter, ratio, seed, ids=[ex.example_id])[0]
        prompt = build_prompt(ex, context, rag=setting == "rag")
        if tokenizer is not None:
            ids = tokenizer(prompt, add_special_tokens=False).input_ids
            if len(ids) > max_prompt_tokens:
                prompt = tokenizer.decode(
                    truncate_middle(ids, max_prompt_tokens), skip_special_tokens=True
                )
        out.append(
            Request(
                task=TASK,
                example_id=ex.example_id,
                prompt=prompt,
                gold=(ex.answer,),
                condition={
                    "setting": setting,
                    "method": method,
                    "delimiter": delimiter or "none",
                    "ratio": ratio,
                    "difficulty": ex.difficulty,
                    "length": ex.length,
                    "domain": ex.domain,
                },
                max_new_tokens=MAX_NEW_TOKENS,
                stop=StopRule(newline=False, answer_pattern=r"The correct answer is \(?[A-D]\b"),
            )
        )
    return out


def score(row: dict) -> float:
    return float(extract_answer(row["output"]) == row["gold"][0])


def breakdown(table, by: Sequence[str] = ("setting", "method"), score_col: str = "correct"):
    """Accuracy (%) overall and per difficulty and length, the columns of the paper's Table 1."""
    rows = []
    for key, g in table.groupby(list(by), dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        rec = dict(zip(by, key))
        rec["n"] = len(g)
        rec["Overall"] = 100 * g[score_col].mean()
        for col, values in (("difficulty", DIFFICULTIES), ("length", LENGTHS)):
            for v in values:
                sub = g[g[col] == v]
                rec[v.capitalize()] = 100 * sub[score_col].mean() if len(sub) else float("nan")
        rows.append(rec)
    return pd.DataFrame(rows)
