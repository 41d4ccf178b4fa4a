"""One entry of the operation log.

A record's *body* is canonical JSON so the same operation always hashes and compares to the same
bytes, whichever process wrote it. The sequence number is deliberately not part of the body: it is
assigned by the log under its lock at append time and lives in the frame header, so a record can be
built (and its body encoded) before anyone knows where it will land.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ..clock import now_ms

# Body fields and the Python type each must have after JSON decoding. `bool` is excluded from the
# int checks below because JSON `true` would otherwise pass as an int.
_STR_FIELDS = ("type", "op_id", "actor")
_INT_FIELDS = ("v", "at")


_type = type  # `type` is also a field name of Record; the alias keeps the checks unambiguous to read
_DECODER = json.JSONDecoder()


def _parse_json(text: str) -> Any:
    # raw_decode skips json.loads' two whitespace regex passes (a large share of the per-record
    # cost for small bodies); canonical bodies never have surrounding whitespace, and anything
    # unusual falls back to json.loads for its exact semantics and error message.
    try:
        obj, end = _DECODER.raw_decode(text)
        if end == len(text):
            return obj
    except ValueError:
        pass
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError(f"record body is not valid JSON: {e}") from e


def _invalid(obj: Any) -> str:
    """Why a decoded body is not a record (only called once it is known not to be)."""
    if not isinstance(obj, dict):
        return "record body is not a JSON object"
    for name in ("type", "op_id", "actor", "at", "payload", "v"):
        if name not in obj:
            return f"record body lacks field {name!r}"
    for name in _STR_FIELDS:
        if not isinstance(obj[name], str):
            return f"record field {name!r} is not a string"
    for name in _INT_FIELDS:
        value = obj[name]
        if not isinstance(value, int) or isinstance(value, bool):
            return f"record field {name!r} is not an integer"
    if not isinstance(obj["payload"], dict):
        return "record field 'payload' is not an object"
    if not isinstance(obj.get("node", ""), str):
        return "record field 'node' is not a string"
    return "record body is malformed"


def new_op_id() -> str:
    """A fresh op_id: 32 hex digits like a uuid4's, but the first 12 are the writer's clock in ms and the
    other 20 random (80 bits: two writers colliding in one millisecond is as likely as guessing a 10-byte
    key). Time-ordered ids land at the end of the op_id index every node keeps instead of anywhere in it,
    so a batch's commit writes a few index pages rather than one per record (measured: 10% of a
    writer's time, 230 MB less written for 100,000 records)."""
    return f"{now_ms():012x}{os.urandom(10).hex()}"


# sort_keys + compact separators make equal values encode to identical bytes; ensure_ascii=False
# keeps non-ASCII text readable and smaller; allow_nan=False because NaN/Infinity are not JSON and
# would not survive another reader. One encoder for every record (json.dumps with these arguments
# builds a new one per call).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _canonical_json(obj: Any) -> bytes:
    return _ENCODER.encode(obj).encode("utf-8")


@dataclass(frozen=True, slots=True)
class Record:
    type: str
    op_id: str
    actor: str
    at: int
    payload: dict
    seq: int = 0
    version: int = 1
    node: str = ""  # the id of the node that wrote it (records written before nodes had ids carry none)

    def body(self) -> bytes:
        """Canonical JSON of everything but `seq` (see module docstring)."""
        obj = {
            "v": self.version,
            "op_id": self.op_id,
            "actor": self.actor,
            "at": self.at,
            "type": self.type,
            "payload": self.payload,
        }
        if self.node:
            obj["node"] = self.node
        return _canonical_json(obj)

    def at_seq(self, seq: int) -> Record:
        """This record as appended at `seq` (positional: dataclasses.replace costs ~4 µs a call)."""
        return Record(self.type, self.op_id, self.actor, self.at, self.payload, seq, self.version, self.node)

    def with_node(self, node: str) -> Record:
        """This record stamped with the id of the node that writes it."""
        return Record(self.type, self.op_id, self.actor, self.at, self.payload, self.seq, self.version, node)

    @classmethod
    def from_body(cls, body: bytes, seq: int) -> Record:
        """Decode a body written by `body()`. Raises ValueError for anything that is not one."""
        # This is the hot path of reading the log (once per record), hence the plain-type checks
        # and positional construction; `_invalid` works out a precise message only on failure.
        try:
            text = str(body, "utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"record body is not UTF-8: {e}") from e
        obj = _parse_json(text)
        try:
            kind, op_id, actor, at, payload, version = (
                obj["type"], obj["op_id"], obj["actor"], obj["at"], obj["payload"], obj["v"]
            )
            node = obj.get("node", "")
        except (KeyError, TypeError, AttributeError):
            raise ValueError(_invalid(obj)) from None
        if (
            _type(kind) is not str
            or _type(op_id) is not str
            or _type(actor) is not str
            or _type(at) is not int
            or _type(version) is not int
            or _type(payload) is not dict
            or _type(node) is not str
        ):
            raise ValueError(_invalid(obj))
        return cls(kind, op_id, actor, at, payload, seq, version, node)

    @classmethod
    def new(
        cls,
        type: str,
        actor: str,
        payload: dict,
        *,
        at: int | None = None,
        op_id: str | None = None,
        node: str = "",
    ) -> Record:
        """A not-yet-appended record (seq 0) with a fresh op_id and the writer's clock (a node stamps
        its id on the records it appends)."""
        return cls(
            node=node,
            type=type,
            op_id=op_id if op_id is not None else new_op_id(),
            actor=actor,
            at=at if at is not None else now_ms(),
            payload=payload,
        )
