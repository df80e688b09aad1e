"""Each chapter's generation plan, shared by its notebook and by ``longctx reproduce``.

A chapter module has ``plan(params) -> list[Block]``: exactly the requests the notebook
sends for those parameters, cut into blocks in priority order (the headline comparison
first). The notebook calls the same function, so the driver and the notebook produce the
same store keys by construction, and the book finds every row the driver made.

Scales are data, not code: ``lib/longctx/scales/<chapter>.json`` names parameter sets
(``book``: the committed run, sized by its confidence intervals; ``paper``: the paper's
sizes, for a GPU). The notebook's parameter cell holds the ``book`` set (a test checks).
"""

from __future__ import annotations

import json
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from importlib import import_module
from importlib.resources import files
from pathlib import Path
from types import ModuleType

from ..errors import ParameterError
from ..reader import Reader
from .contract import ChapterResult, RunContext

_REQUIRED = object()  # a declaration with no default: its absence is refused


@dataclass(frozen=True)
class Chapter:
    """What a chapter module declares, read once and checked when the chapter is found:

    * ``plan(params) -> list[Block]``, ``claims(ctx: RunContext)`` (its estimates, read
      from the rows of its planned requests only) and
      ``analyze(ctx: RunContext) -> ChapterResult`` (:mod:`.contract`: one run context in,
      one typed result out), plus an optional ``check(params)`` that refuses parameters
      the chapter cannot use;
    * ``ORDER`` (where ``longctx reproduce`` runs its headline blocks), ``NOTEBOOK`` (its
      page's source), ``EXPERIMENTS`` (the stores it offers for download), ``CLAIM_BLOCKS``
      (claim id -> the block-name parts its rows come from), and an optional
      ``PREMISE_SCALE``: the scale whose rows a premise reads beyond the claims' own (the
      length-alone recitations), named in the command a reader without them is shown;
    * ``NEEDS_MODEL`` (its plan takes the reader as ``params["model"]``) and
      ``PLANS_RUN_MODELS`` (planning may run a model, so a dry run passes ``dry_run``).

    Code that iterates over chapters (reproduce, findings, the matrix, downloads) reads
    these fields, never the module's names."""

    name: str
    module: ModuleType
    order: int
    notebook: str
    experiments: tuple[str, ...]
    claim_blocks: dict[str, tuple[str, ...]]
    needs_model: bool
    plans_run_models: bool
    premise_scale: str | None
    plan: Callable
    claims: Callable
    analyze: Callable[[RunContext], ChapterResult]
    check: Callable | None

    @classmethod
    def of(cls, name: str, module: ModuleType) -> Chapter:
        def need(attr: str, kind: type | tuple[type, ...], default=_REQUIRED):
            value = getattr(module, attr, default)
            if value is _REQUIRED:
                raise TypeError(f"chapter {name} lacks {attr}")
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise TypeError(f"chapter {name}: {attr} is {value!r}, not {kind}")
            return value

        for fn in ("plan", "claims", "analyze"):
            if not callable(getattr(module, fn, None)):
                raise TypeError(f"chapter {name} lacks the function {fn}")
        check = getattr(module, "check", None)
        experiments = tuple(need("EXPERIMENTS", tuple))
        blocks = need("CLAIM_BLOCKS", dict)
        if not all(isinstance(e, str) for e in experiments) or not all(
            isinstance(parts, tuple) for parts in blocks.values()
        ):
            raise TypeError(f"chapter {name}: EXPERIMENTS or CLAIM_BLOCKS malformed")
        return cls(
            name=name,
            module=module,
            order=need("ORDER", int),
            notebook=need("NOTEBOOK", str),
            experiments=experiments,
            claim_blocks={claim: tuple(parts) for claim, parts in blocks.items()},
            needs_model=need("NEEDS_MODEL", bool, False),
            plans_run_models=need("PLANS_RUN_MODELS", bool, False),
            premise_scale=need("PREMISE_SCALE", (str, type(None)), None),
            plan=module.plan,
            claims=module.claims,
            analyze=module.analyze,
            check=check if callable(check) else None,
        )


def found_chapters(package_path=__path__, package: str = __name__) -> dict[str, Chapter]:
    """Every chapter module under ``package`` (one with a ``plan``), checked against
    :class:`Chapter`, by name, in ``ORDER``. Two chapters may not share an order, a
    notebook or a store (experiment): each would hide the other."""
    found: dict[str, Chapter] = {}
    for info in pkgutil.iter_modules(package_path):
        module = import_module(f"{package}.{info.name}")
        if callable(getattr(module, "plan", None)):
            found[info.name] = Chapter.of(info.name, module)
    for field_name in ("order", "notebook", "experiments"):
        owner: dict = {}
        for chapter in found.values():
            value = getattr(chapter, field_name)
            for item in value if isinstance(value, tuple) else (value,):
                if item in owner:
                    raise TypeError(
                        f"chapters {owner[item]} and {chapter.name} share the {field_name} {item!r}"
                    )
                owner[item] = chapter.name
    return dict(sorted(found.items(), key=lambda item: (item[1].order, item[0])))


@cache
def contracts() -> dict[str, Chapter]:
    """Every chapter of this package, found, not listed (:func:`found_chapters`)."""
    return found_chapters()


def contract(name: str) -> Chapter:
    """The chapter ``name``'s declared contract; a one-line error for an unknown name."""
    known = contracts()
    if name not in known:
        raise ParameterError(f"unknown chapter '{name}'; known: {', '.join(sorted(known))}")
    return known[name]


def chapters() -> dict[str, ModuleType]:
    """Every chapter module, by name, in ``ORDER`` (the order ``longctx reproduce`` runs
    their headline blocks in)."""
    return {name: chapter.module for name, chapter in contracts().items()}


def get_chapter(name: str) -> ModuleType:
    """The chapter ``name``'s module (its notebook's functions)."""
    return contract(name).module


def scales(chapter: str) -> dict[str, dict]:
    """All named parameter sets of a chapter, each complete: ``book`` (the committed run,
    sized by its confidence intervals; the notebook's parameter cell holds it), ``paper``
    (the paper's sizes, for a GPU), ``ci`` (what CI runs the notebook with, on the smoke-test
    model) and ``smoke`` (the paper's design at a size a unit test can plan). A set may say
    ``"extends": "<other set>"`` and list only what differs; it cannot add parameters."""
    get_chapter(chapter)
    raw = json.loads(
        files("longctx").joinpath("scales", f"{chapter}.json").read_text(encoding="utf-8")
    )

    def resolved(name: str, seen: tuple = ()) -> dict:
        if name in seen:
            raise ParameterError(
                f"scales/{chapter}.json: '{name}' extends itself through {' -> '.join(seen)}"
            )
        own = dict(raw[name])
        base_name = own.pop("extends", None)
        if base_name is None:
            return own
        if base_name not in raw:
            raise ParameterError(
                f"scales/{chapter}.json: '{name}' extends '{base_name}', which does not exist"
            )
        base = resolved(base_name, (*seen, name))
        unknown = set(own) - set(base)
        if unknown:
            raise ParameterError(
                f"scales/{chapter}.json: '{name}' sets {sorted(unknown)}, which '{base_name}' lacks"
            )
        return {**base, **own}

    return {name: resolved(name) for name in raw}


def run_context(
    chapter: str,
    reader: Reader,
    results: str | Path,
    params: dict,
    *,
    compare_with: tuple[str, str] | None = None,
    options: dict | None = None,
) -> RunContext:
    """The run of ``chapter`` for ``reader`` at ``params`` (a scale, overridden), with its
    premise run (the chapter's ``PREMISE_SCALE``, planned for the same reader) where it has
    one. Findings, the matrix and the pages build a chapter's run here."""
    declared, results = contract(chapter), Path(results)
    premise = None
    if declared.premise_scale is not None:
        extra = {k: params[k] for k in ("model", "dry_run") if k in params}
        premise = RunContext(reader, {**scale(chapter, declared.premise_scale), **extra}, results)
    return RunContext(reader, params, results, compare_with, dict(options or {}), premise)


def scale(chapter: str, name: str, **overrides) -> dict:
    """One named parameter set, with ``overrides`` applied: an unknown name, or a value of
    another kind than the set's own (a word where a number goes, a number where a list goes),
    is a one-line error."""
    sets = scales(chapter)
    if name not in sets:
        raise ParameterError(f"chapter '{chapter}' has no scale '{name}'; known: {', '.join(sets)}")
    params = dict(sets[name])
    unknown = set(overrides) - set(params)
    if unknown:
        raise ParameterError(
            f"unknown parameters for {chapter}: {sorted(unknown)}; known: {sorted(params)}"
        )
    for key, value in overrides.items():
        # A parameter may take the kind of value any of the chapter's scales gives it (one
        # number, or a mapping per size; None where a scale leaves it unset).
        seen = [s[key] for s in sets.values() if s.get(key) is not None]
        if value is not None and seen and not any(_same_kind(value, ref) for ref in seen):
            kinds = " or ".join(dict.fromkeys(_kind(ref) for ref in seen))
            raise ParameterError(
                f"{chapter}.{key} takes {kinds} (the {name} scale's is {params[key]!r}), "
                f"not {value!r}"
            )
    return {**params, **overrides}


def _kind(value) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a whole number" if isinstance(value, int) else "a number"
    if isinstance(value, (list, tuple)):
        return "a list" + (f" of {_kind(value[0]).removeprefix('a ')}s" if value else "")
    return {str: "text", dict: "a mapping"}.get(type(value), type(value).__name__)


def _same_kind(value, reference) -> bool:
    """Whether an override can stand where a scale holds ``reference`` (None takes anything;
    a number takes a whole number; a list takes a list of the same kind of items)."""
    if reference is None:
        return True
    if isinstance(reference, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(reference, bool)
    if isinstance(reference, int):
        return isinstance(value, int)
    if isinstance(reference, float):
        return isinstance(value, (int, float))
    if isinstance(reference, (list, tuple)):
        return isinstance(value, (list, tuple)) and (
            not reference or all(_same_kind(v, reference[0]) for v in value)
        )
    return isinstance(value, type(reference))


def check_params(chapter: str, overrides: dict) -> dict:
    """The chapter's book parameters with ``overrides``, checked before any work: each value
    of the kind the chapter's scales give it (:func:`scale`), no list left empty that the
    book's set fills, and what the chapter's own ``check(params)`` asks (a depth its claims
    compare, say). A one-line :class:`ParameterError` otherwise."""
    book = scales(chapter)["book"]
    params = scale(chapter, "book", **{k: v for k, v in overrides.items() if k in book})
    for key, value in overrides.items():
        if isinstance(book.get(key), (list, tuple)) and book[key] and not value:
            raise ParameterError(f"{chapter}.{key} is empty; it needs at least one value")
    check_counts(chapter, overrides)
    hook = contract(chapter).check
    if hook is not None:
        hook(params)
    return params


def check_counts(chapter: str, overrides: dict) -> None:
    """Refuse, in one line, a count below what its book value allows (:func:`_least`): no
    zero examples per cell, no negative context size, before any kernel or plan starts."""
    book = scales(chapter)["book"]
    for key, value in overrides.items():
        least = _least(book.get(key))
        if least is not None and any(v < least for v in _counts(value)):
            raise ParameterError(
                f"{chapter}.{key} is {value!r}; it counts "
                + ("things: each value at least 1" if least else "from 0: no negative value")
            )


def _counts(value) -> list[int]:
    """The integers of a parameter value (itself, the items of a list, or the values of a
    per-size mapping)."""
    items = _items(value)
    return [v for v in items if isinstance(v, int) and not isinstance(v, bool)]


def _items(value) -> list:
    if isinstance(value, dict):
        return [v for inner in value.values() for v in _items(inner)]
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _least(book_value) -> int | None:
    """The least integer a parameter may take, from its book value: a count the book sets
    at 1 or more (examples per cell, context sizes) stays at 1 or more, one it sets at 0
    (a seed, a filler length) is never negative; None for a parameter that is not made of
    integers."""
    counts = _counts(book_value)
    if not counts or len(counts) != len(_items(book_value)):
        return None
    return 1 if min(counts) >= 1 else 0 if min(counts) >= 0 else None
