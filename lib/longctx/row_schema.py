"""The shape of a stored row, checked when a store is written to.

A store holds two kinds of rows. A *generation* (:func:`longctx.runner.make_row`) is one
answer with its provenance: the request as asked, the prompt as rendered, the output, token
counts, timing and decoding parameters. An *attention* row
(:func:`longctx.attention.attention_rows`) is one prompt's final-token attention score. Each
field has one JSON type; a field is optional only where rows stored by earlier versions of
longctx lack it. :func:`row_fault` says, in one line, what is wrong with a row, so a store
refuses it when it is written rather than an analysis or an export stumbling on it later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# JSON types by name, as a fault names them; a bool is never a number here.
TEXT, INTEGER, NUMBER, FLAG, OBJECT, LIST, NULL = (
    "a string",
    "an integer",
    "a number",
    "true or false",
    "an object",
    "a list",
    "null",
)


def _json_type(value) -> str:
    if isinstance(value, bool):
        return FLAG
    if isinstance(value, int):
        return INTEGER
    if isinstance(value, float):
        return NUMBER
    if isinstance(value, str):
        return TEXT
    if isinstance(value, Mapping):
        return OBJECT
    if isinstance(value, list | tuple):
        return LIST
    return NULL if value is None else type(value).__name__


@dataclass(frozen=True)
class Field:
    """One field of a row: its name, the JSON types it may take and whether every row has it."""

    name: str
    types: tuple[str, ...]
    required: bool = True

    def fault(self, row: Mapping) -> str | None:
        if self.name not in row:
            return f"lacks the field '{self.name}'" if self.required else None
        kind = _json_type(row[self.name])
        if kind in self.types or (kind == INTEGER and NUMBER in self.types):
            return None
        return f"has '{self.name}' as {kind}, not {' or '.join(self.types)}"


@dataclass(frozen=True)
class RowSchema:
    """The fields of one kind of row, and the field that tells that kind apart."""

    kind: str
    marker: str  # a field only this kind has
    fields: tuple[Field, ...]

    def fault(self, row: Mapping) -> str | None:
        return next((f for field in self.fields if (f := field.fault(row))), None)


_PROVENANCE = (
    Field("key", (TEXT,)),
    Field("model", (TEXT,)),
    Field("model_fingerprint", (TEXT,)),
    Field("prompt_mode", (TEXT,)),
    Field("prompt", (TEXT,)),
    Field("longctx_version", (TEXT,)),
)

GENERATION = RowSchema(
    "generation",
    "output",
    (
        *_PROVENANCE,
        Field("backend", (TEXT,), required=False),  # rows before backends were hf's
        Field("task", (TEXT,)),
        Field("condition", (OBJECT,)),
        Field("example_id", (TEXT,)),
        Field("gold", (LIST,)),
        Field("request", (OBJECT,), required=False),  # the prompt as asked, before templates
        Field("output", (TEXT,)),
        Field("raw_output", (TEXT,)),
        Field("prompt_tokens", (INTEGER,)),
        Field("new_tokens", (INTEGER,)),
        Field("stopped_by_rule", (FLAG,)),
        Field("stop_reason", (TEXT, NULL), required=False),
        Field("batch_seconds", (NUMBER,)),
        Field("batch_size", (INTEGER,)),
        Field("seconds_per_prompt", (NUMBER,)),
        Field("params", (OBJECT,)),
        Field("meta", (OBJECT,)),
        Field("engine", (OBJECT,), required=False),  # a served backend's own report
        Field("host", (TEXT,)),
        Field("created", (TEXT,)),
    ),
)

ATTENTION = RowSchema(
    "attention",
    "abs",
    (
        *_PROVENANCE,
        Field("layer", (INTEGER, LIST)),  # one layer, or the layers averaged
        Field("tokens", (INTEGER,)),
        Field("abs", (NUMBER,)),
        Field("seconds", (NUMBER,)),
        Field("device", (TEXT,)),
        Field("attention", (LIST,), required=False),  # the vector, where it was kept
        Field("document_mass", (LIST,), required=False),  # per document, where asked
    ),
)

SCHEMAS = (GENERATION, ATTENTION)


def row_fault(row) -> str | None:
    """Why ``row`` is not a storable row (one clause, naming its key where it has one), or None."""
    if not isinstance(row, Mapping):
        return f"a row is a JSON object, not {_json_type(row)}"
    schema = next((s for s in SCHEMAS if s.marker in row), None)
    if schema is None:
        markers = " nor ".join(f"'{s.marker}' ({s.kind})" for s in SCHEMAS)
        fault = f"has neither {markers}"
    else:
        fault = schema.fault(row)
    if fault is None:
        return None
    key = row.get("key")
    named = f"row {key[:12]!r}" if isinstance(key, str) else "a row"
    kind = f" ({schema.kind})" if schema else ""
    return f"{named}{kind} {fault}"
