"""Lost in the Middle synthetic key-value retrieval (Liu et al., 2023, section 3).

Inputs are a JSON object of k unique UUID key/value pairs and one key; the model
must return that key's value. Accuracy: the gold value occurs in the output
(case-insensitive). The gold pair is moved to a chosen position; the other k-1
pairs keep their order.

Two sources of examples:

* :func:`synthetic_examples`: generated from a seed (k pairs of version-4 UUIDs
  drawn from a seeded ``random.Random``), any k;
* :func:`release_examples`: the paper's released files (75 or 140 pairs per
  record), optionally trimmed to the first k pairs (the gold pair always kept).
"""

from __future__ import annotations

import gzip
import itertools
import json
import random
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..data import fetch
from ..errors import DataFileError, ParameterError
from ..formats import format_identifier, identifier_pattern, infer_format
from ..metrics import kv_accuracy
from ..prompts import load_prompt
from ..requests import Request, StopRule
from ..transforms import Example, Item, Position, fill_slots, recorded_fields, span_of, system_of

TASK = "kv_retrieval"
UUID_PATTERN = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
# The small instruct models tend to echo the key before the value
# ("The value corresponding to the key "<36 chars>" is "<36 chars>"."), about 60-70 tokens.
MAX_NEW_TOKENS = 96


@dataclass(frozen=True)
class KVExample:
    example_id: str
    pairs: tuple[tuple[str, str], ...]
    key: str
    value: str

    def __post_init__(self):
        keys = [k for k, _ in self.pairs]
        if len(keys) < 2:
            raise ParameterError("a key-value example needs at least 2 pairs")
        if len(set(keys)) != len(keys):
            raise ParameterError(f"example {self.example_id} has duplicate keys")
        if (self.key, self.value) not in self.pairs:
            raise ParameterError(f"example {self.example_id}: gold pair not among its pairs")

    @property
    def num_pairs(self) -> int:
        return len(self.pairs)

    @property
    def gold_index(self) -> int:
        return self.pairs.index((self.key, self.value))

    def with_gold_at(self, index: int) -> KVExample:
        """The same example with the gold pair moved to 0-based ``index``; others keep their order."""
        if not 0 <= index < self.num_pairs:
            raise ParameterError(f"gold index {index} outside 0..{self.num_pairs - 1}")
        rest = [p for p in self.pairs if p != (self.key, self.value)]
        rest.insert(index, (self.key, self.value))
        return KVExample(self.example_id, tuple(rest), self.key, self.value)

    def with_format(self, delimiter: str) -> KVExample:
        """The same example with every key and value re-laid out with ``delimiter``
        (``"-"`` UUID, ``""`` plain text, ``"&"`` modified UUID; see :mod:`longctx.formats`)."""

        def fmt(x: str) -> str:
            return format_identifier(x, delimiter)

        return KVExample(
            self.example_id,
            tuple((fmt(k), fmt(v)) for k, v in self.pairs),
            fmt(self.key),
            fmt(self.value),
        )

    def trimmed(self, k: int) -> KVExample:
        """Keep the gold pair and the first k-1 distractors (in their original order)."""
        if not 2 <= k <= self.num_pairs:
            raise ParameterError(f"cannot trim a {self.num_pairs}-pair example to {k} pairs")
        distractors = [p for p in self.pairs if p != (self.key, self.value)][: k - 1]
        gold_at = min(self.gold_index, k - 1)
        distractors.insert(gold_at, (self.key, self.value))
        return KVExample(self.example_id, tuple(distractors), self.key, self.value)


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def synthetic_examples(n: int, num_pairs: int, seed: int = 0, num_hex: int = 32) -> list[KVExample]:
    """``n`` examples of ``num_pairs`` unique pairs; the gold key is drawn uniformly.

    Keys and values are version-4 UUIDs (``num_hex=32``) or, for longer ids (the C-NORM
    paper's high-density setting: 128 characters), ``num_hex / 32`` UUIDs joined by ``-``.
    """
    if n < 1 or num_pairs < 2:
        raise ParameterError(f"need n >= 1 and num_pairs >= 2, got n={n}, num_pairs={num_pairs}")
    if num_hex < 32 or num_hex % 32:
        raise ParameterError(f"num_hex must be a multiple of 32, got {num_hex}")
    # 32-digit ids keep the original seed string, so earlier chapters' examples are unchanged.
    rng = random.Random(f"kv:{seed}:{num_pairs}" + ("" if num_hex == 32 else f":{num_hex}"))
    suffix = "" if num_hex == 32 else f"-h{num_hex}"

    def new_id() -> str:
        return "-".join(_uuid(rng) for _ in range(num_hex // 32))

    out = []
    for i in range(n):
        seen: set[str] = set()
        pairs = []
        while len(pairs) < num_pairs:
            k, v = new_id(), new_id()
            if k in seen or v in seen:
                continue
            seen.update((k, v))
            pairs.append((k, v))
        key, value = pairs[rng.randrange(num_pairs)]
        out.append(KVExample(f"syn-s{seed}-k{num_pairs}{suffix}-{i}", tuple(pairs), key, value))
    return out


def _record_lines_tokens(tokenizer, pairs: Sequence[tuple[str, str]]) -> list[int]:
    """Each pair's tokens as :func:`format_pairs` writes it (one line, leading space and
    trailing comma): their sum is the records' length to within a token or two."""
    lines = [f" {json.dumps(k)}: {json.dumps(v)},\n" for k, v in pairs]
    return [len(ids) for ids in tokenizer(lines, add_special_tokens=False).input_ids]


def records_tokens(tokenizer, pairs: Sequence[tuple[str, str]]) -> int:
    """The records' length in ``tokenizer``'s tokens, as the prompt writes them."""
    return len(tokenizer(format_pairs(pairs), add_special_tokens=False).input_ids)


@dataclass(frozen=True)
class SizedNeedle:
    """A key-value needle written to fit a budget, and its records' length in tokens."""

    example: KVExample
    tokens: int


def sized_needles(
    n: int, budgets: Sequence[int], tokenizer, *, seed: int = 0
) -> dict[int, list[SizedNeedle]]:
    """``n`` needles, each written as records of at most each budget's tokens of
    ``tokenizer`` (their exact length measured once, kept beside each): needle *i* keeps one
    gold pair at every budget, and its distractors are the first of one seeded stream, as
    many as fit (a shorter context is a prefix of a longer one). The gold pair stands first;
    move it with :meth:`KVExample.with_gold_at`."""
    if n < 1 or not budgets or min(budgets) < 1:
        raise ParameterError(f"need n >= 1 and budgets >= 1 token, got n={n}, {list(budgets)}")
    out: dict[int, list[SizedNeedle]] = {int(b): [] for b in budgets}
    for i in range(n):
        rng = random.Random(f"kv-needle:{seed}:{i}")
        pairs = [(_uuid(rng), _uuid(rng))]
        counts = _record_lines_tokens(tokenizer, pairs)
        seen = set(pairs[0])
        while sum(counts) < max(budgets):
            batch = []
            while len(batch) < 64:
                k, v = _uuid(rng), _uuid(rng)
                if not {k, v} & seen:
                    seen.update((k, v))
                    batch.append((k, v))
            pairs += batch
            counts += _record_lines_tokens(tokenizer, batch)
        running = list(itertools.accumulate(counts))
        for budget in out:
            k = max(2, sum(1 for total in running if total <= budget))
            tokens = records_tokens(tokenizer, pairs[:k])
            while k > 2 and tokens > budget:
                k -= 1
                tokens = records_tokens(tokenizer, pairs[:k])
            example = KVExample(f"kvn-s{seed}-{i}", tuple(pairs[:k]), *pairs[0])
            out[budget].append(SizedNeedle(example, tokens))
    return out


def read_release_file(path: str | Path, limit: int | None = None) -> list[KVExample]:
    """Read the paper's ``kv-retrieval-*_keys.jsonl.gz`` (fields: ordered_kv_records, key, value)."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            for n, line in enumerate(f):
                if limit is not None and n >= limit:
                    break
                rec = json.loads(line)
                pairs = tuple((k, v) for k, v in rec["ordered_kv_records"])
                out.append(
                    KVExample(f"{path.name.split('.')[0]}-{n}", pairs, rec["key"], rec["value"])
                )
    except (OSError, EOFError, json.JSONDecodeError, KeyError, ValueError) as err:
        raise DataFileError(
            f"{path} is not a valid key-value release file ({type(err).__name__}: {err})"
        ) from None
    return out


def release_examples(
    total_pairs: int, limit: int | None = None, num_pairs: int | None = None
) -> list[KVExample]:
    """Examples from the released 75- or 140-pair file, optionally trimmed to ``num_pairs``."""
    if total_pairs not in (75, 140):
        raise ParameterError(f"release files exist for 75 and 140 pairs here, not {total_pairs}")
    examples = read_release_file(fetch(f"kv-retrieval-{total_pairs}"), limit)
    return [e.trimmed(num_pairs) for e in examples] if num_pairs else examples


def format_pairs(pairs: Sequence[tuple[str, str]]) -> str:
    """Serialize pairs one per line, as the paper's Figure 6 and release code do."""
    last = len(pairs) - 1
    return "".join(
        ("{" if i == 0 else " ")
        + json.dumps(k)
        + ": "
        + json.dumps(v)
        + (",\n" if i != last else "}")
        for i, (k, v) in enumerate(pairs)
    )


def build_prompt(example: KVExample, query_aware: bool = False) -> str:
    name = "kv_retrieval_with_query_aware_contextualization" if query_aware else "kv_retrieval"
    return load_prompt(name).format(
        formatted_kv_records=format_pairs(example.pairs), key=example.key
    )


def position_indices(num_pairs: int, positions: Iterable[float | int]) -> list[int]:
    """Map gold positions to 0-based indices, sorted and without repeats.

    Integers >= 1 are 1-based positions (1 = first); floats in [0, 1] are relative
    depths (0 = first, 1 = last), rounded to the *nearest* index (the multi-document
    chapter rounds down; both are :class:`longctx.transforms.Position` conventions, kept
    apart because merging them would move committed prompts, e.g. depth 0.75 of 10).
    """
    return sorted({Position(p, "nearest").index(num_pairs, "pair") for p in positions})


def max_new_tokens_for(num_hex: int) -> int:
    """Room for an echoed key and the value: 96 tokens per 32 hex digits."""
    return MAX_NEW_TOKENS * max(1, num_hex // 32)


def make_requests(
    examples: Sequence[KVExample],
    positions: Iterable[float | int],
    query_aware: bool = False,
    source: str = "synthetic",
    extra_condition: dict | None = None,
) -> list[Request]:
    """One request per (example, gold position). Ids may be in any format of
    :mod:`longctx.formats`; the stop rule waits for a complete id in that format.
    ``extra_condition`` adds fields (format, density) to every request's condition."""
    positions = list(positions)
    reqs = []
    for ex in examples:
        num_hex, delimiter = infer_format(ex.value)
        for idx in position_indices(ex.num_pairs, positions):
            moved = ex.with_gold_at(idx)
            reqs.append(
                Request(
                    task=TASK,
                    example_id=ex.example_id,
                    prompt=build_prompt(moved, query_aware),
                    gold=(ex.value,),
                    condition={
                        "num_pairs": ex.num_pairs,
                        "gold_index": idx,
                        "query_aware": query_aware,
                        "source": source,
                        **(extra_condition or {}),
                    },
                    max_new_tokens=max_new_tokens_for(num_hex),
                    # Only a complete id other than the key ends the answer: models put lead-ins,
                    # blank lines and code fences before it, and the paper scores the whole output.
                    stop=StopRule(
                        newline=False,
                        answer_pattern=identifier_pattern(num_hex, delimiter),
                        echoes=(ex.key,),
                    ),
                )
            )
    return reqs


def score(row: dict) -> float:
    return kv_accuracy(row["output"], row["gold"][0])


def _returned_and_gold(row: dict) -> tuple[int | None, int | None]:
    """0-based indices of the returned value and of the gold value among the prompt's
    pairs (None when absent), parsing the prompt once. Ids may be in any format."""
    pattern = identifier_pattern(*infer_format(row["gold"][0]))
    pair_line = re.compile(r'"(' + pattern + r')": "(' + pattern + r')"')
    values = [v.lower() for _, v in pair_line.findall(row["prompt"])]
    found = [m.lower() for m in re.findall(pattern, row["output"])]
    # the last value from the context that the output mentions: a model may echo others first
    returned = next((u for u in reversed(found) if u in values), None)
    gold = row["gold"][0].lower()
    return (None if returned is None else values.index(returned)), (
        values.index(gold) if gold in values else None
    )


def returned_index(row: dict) -> int | None:
    """Which pair's value the output returned, as a 0-based index into the prompt's
    pairs (the last value from the context that the output mentions, since a model
    may echo other pairs before answering). None when it holds no value from the context."""
    return _returned_and_gold(row)[0]


def returned_offset(row: dict) -> int | None:
    """For a wrong answer, which pair's value came back, as an offset from the gold pair
    (-1: the pair just before it). None when the output holds no value from the context."""
    index, gold = _returned_and_gold(row)
    return None if index is None or gold is None else index - gold


ERROR_KINDS = (
    "first pair's value",
    "a pair within 3 of the gold pair",
    "another pair's value",
    "no value from the context",
)


def classify_error(row: dict) -> str:
    """Name a wrong answer by where its value came from (one of :data:`ERROR_KINDS`).

    The first pair is its own kind because it is the pair right after the key in a
    query-aware prompt; it wins over "within 3" when both apply.
    """
    index, gold = _returned_and_gold(row)
    if index is None:
        return ERROR_KINDS[3]
    if index == 0:
        return ERROR_KINDS[0]
    return ERROR_KINDS[1] if gold is not None and abs(index - gold) <= 3 else ERROR_KINDS[2]


# ---------------------------------------------------------------------------------------------
# Through transforms: an example in the transforms' terms, and its request


def to_example(example: KVExample, source: str = "synthetic", **fields) -> Example:
    """A key-value example for :mod:`longctx.transforms`: every pair in the context in its
    order, the gold pair marked; ``fields`` (density, num_hex ...) are recorded in the
    condition as the C-NORM chapter does."""
    items = tuple(
        Item(v, k, (k, v) == (example.key, example.value), "pair") for k, v in example.pairs
    )
    return Example(
        TASK,
        example.example_id,
        example.key,
        (example.value,),
        items,
        (),
        "given",
        {"source": source, **fields},
    )


def render(example: Example) -> Request:
    """Key-value prompts through :func:`make_requests`, with the example's fields (source,
    and density / num_hex / delimiter for C-NORM's grid)."""
    pairs = tuple((it.title, it.text) for it in example.items)
    gold = example.gold
    kv_ex = KVExample(example.example_id, pairs, gold.title, gold.text)
    extra = {k: v for k, v in example.fields.items() if k != "source"}
    if "delimiter" in example.settings:
        extra["delimiter"] = example.settings["delimiter"]
    req = make_requests(
        [kv_ex],
        [example.gold_index + 1],
        query_aware=example.settings.get("query_aware", False),
        source=example.fields.get("source", "synthetic"),
        extra_condition=extra or None,
    )[0]
    cond = {**req.condition, **recorded_fields(example)}
    prompt = fill_slots(req.prompt, span_of(req.prompt, format_pairs(pairs)), example)
    return replace(req, prompt=prompt, condition=cond, system=system_of(example))
