"""What a record's payload must hold, checked before its handler reads it.

A record on a log is data someone else wrote (another build, another node, a hand-made tool): a handler
that trusted its payload raised on a title that was a number (`clean_title(7)`: AttributeError), which no
applier caught — the record stopped the log on every node that applied it, at that seq, for good. So each
record kind declares the shape its builder writes (`Shape`: every key a handler reads, its JSON type, and
whether it may be missing), and the applier refuses a payload of another shape as malformed before the
handler runs: one refusal every node decides alike, never a half-applied record, never a stopped log.
Keys a shape does not name are left alone (a later build may add one).

Types are exact (JSON decodes to str, int, float, bool, list, dict, None): `True` is not an integer here.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TEXT, INT, LIST, DICT, NONE, BOOL = (str,), (int,), (list,), (dict,), (type(None),), (bool,)

_NAMES = {str: "text", int: "an integer", float: "a number", bool: "true/false", list: "a list",
          dict: "an object", type(None): "null"}


@dataclass(frozen=True)
class Field:
    types: tuple[type, ...]
    required: bool = True
    items: tuple[type, ...] | None = None     # a list's items, each of one of these types


def need(*types: tuple[type, ...], items: tuple[type, ...] | None = None) -> Field:
    """A key the payload must hold, of one of these types."""
    return Field(sum(types, ()), True, items)


def may(*types: tuple[type, ...], items: tuple[type, ...] | None = None) -> Field:
    """A key the payload may leave out; when present, of one of these types."""
    return Field(sum(types, ()), False, items)


Shape = Mapping[str, Field]


def _said(value: Any) -> str:
    return _NAMES.get(type(value), type(value).__name__)


def _expected(types: tuple[type, ...]) -> str:
    return " or ".join(_NAMES.get(t, t.__name__) for t in types)


def shape_problem(payload: Mapping[str, Any], shape: Shape) -> str | None:
    """Why `payload` is not of `shape` ("'title' is an integer, not text"), or None when it is."""
    for key, f in shape.items():
        if key not in payload:
            if f.required:
                return f"it lacks '{key}'"
            continue
        value = payload[key]
        if type(value) not in f.types:
            return f"'{key}' is {_said(value)}, not {_expected(f.types)}"
        if f.items is not None and type(value) is list:
            for item in value:
                if type(item) not in f.items:
                    return f"'{key}' holds {_said(item)}, not {_expected(f.items)}"
    return None
