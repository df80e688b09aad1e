"""A chapter's named parameter sets, and the checks an override passes before any work.

Scales are data, not code: ``lib/longctx/scales/<chapter>.json`` names parameter sets
(``book``: the committed run, sized by its confidence intervals; ``paper``: the paper's
sizes, for a GPU; ``claims``: every claim at the size the matrix judges; ``ci`` and
``smoke``). Its ``about`` entry says what each parameter means; a notebook's parameter cell
names a scale and holds only the overrides of it, so the values live here alone.
"""

from __future__ import annotations

import json
from importlib.resources import files

from ..errors import ParameterError

ABOUT = "about"  # the scales file's entry that says what each parameter means, not a scale


def _raw(chapter: str) -> dict:
    return json.loads(
        files("longctx").joinpath("scales", f"{chapter}.json").read_text(encoding="utf-8")
    )


def parameter_notes(chapter: str) -> dict[str, str]:
    """What each of a chapter's parameters means, in the scales file's words (its
    ``about`` entry)."""
    return dict(_raw(chapter).get(ABOUT, {}))


def read_scales(chapter: str) -> dict[str, dict]:
    """All named parameter sets of a chapter, each complete. A set may say ``"extends":
    "<other set>"`` and list only what differs; it cannot add parameters."""
    raw = {k: v for k, v in _raw(chapter).items() if k != ABOUT}

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


def scale_of(chapter: str, sets: dict[str, dict], name: str, overrides: dict) -> dict:
    """The set ``name`` of ``sets`` with ``overrides`` applied: an unknown name, or a value of
    another kind than the set's own (a word where a number goes, a number where a list goes),
    is a one-line error."""
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


def overrides_mapping(chapter: str, given) -> dict:
    """A notebook's ``params`` (the overrides of its scale) as a mapping, or a one-line error
    where it is not one; nothing given is no override."""
    if not isinstance(given or {}, dict):
        raise ParameterError(f"params must be a mapping of {chapter}'s parameters, not {given!r}")
    return dict(given or {})


def check_overrides(chapter: str, book: dict, overrides: dict) -> None:
    """Refuse, in one line, an override the ``book`` set says cannot be: a list left empty
    that the book fills, a count below what its book value allows (:func:`_least`: no zero
    examples per cell, no negative context size), before any kernel or plan starts."""
    for key, value in overrides.items():
        if isinstance(book.get(key), (list, tuple)) and book[key] and not value:
            raise ParameterError(f"{chapter}.{key} is empty; it needs at least one value")
        least = _least(book.get(key))
        if least is not None and any(v < least for v in _counts(value)):
            raise ParameterError(
                f"{chapter}.{key} is {value!r}; it counts "
                + ("things: each value at least 1" if least else "from 0: no negative value")
            )


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
