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
from functools import cache
from importlib import import_module
from importlib.resources import files
from types import ModuleType

from ..errors import ParameterError


@cache
def chapters() -> dict[str, ModuleType]:
    """Every chapter module of this package (one with a ``plan``), by name, in ``ORDER``
    (the order ``longctx reproduce`` runs their headline blocks in): found, not listed."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = import_module(f"{__name__}.{info.name}")
        if callable(getattr(module, "plan", None)):
            found[info.name] = module
    return dict(sorted(found.items(), key=lambda item: (getattr(item[1], "ORDER", 99), item[0])))


def get_chapter(name: str) -> ModuleType:
    known = chapters()
    if name not in known:
        raise ParameterError(f"unknown chapter '{name}'; known: {', '.join(sorted(known))}")
    return known[name]


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
    hook = getattr(get_chapter(chapter), "check", None)
    if callable(hook):
        hook(params)
    return params
