"""The grants database's records, decoded and checked one by one (pure): a bad one is named, never guessed.

Keys (``grants`` database): ``approval/<id>`` → an :class:`~.approvals.Approval` as a msgpack map,
``posture/<session>`` → a :class:`~.posture.Posture` value, ``rules/<scope>`` and ``rules/session/<id>`` → a list
of rule texts, ``policy`` → what only the configuration knows (rewritten by the authority at every start).

:func:`decode_record` answers what a record holds or raises :class:`~ouroactors.core.errors.CorruptRecord`
naming the record (``grants/<key>``) and what is wrong with it. DESIGN.md ("Bad input"): a corrupt durable record
fails closed, is quarantined and reported — the authority copies it to ``quarantine`` under the same name (the
original stays in place) and fails closed for that one record (see :func:`unreadable_for`): a corrupt approval is
not approved and is no longer pending; a corrupt posture or stored rule makes every decision it could change
``ask``, never allow (as :class:`~.inline.InlineGrants` answers when a stored rule cannot be read).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, get_args

import msgpack

from ...core.errors import CorruptRecord
from .approvals import Approval, Status
from .posture import Posture
from .rules import Scope

__all__ = ["QUARANTINE_PREFIX", "decode_record", "unreadable_for"]

QUARANTINE_PREFIX = b"grants/"  # the record's key in the ``quarantine`` database: this prefix and its own key
_STATUSES = frozenset(get_args(Status))
_INTS = ("state_version", "deadline_ns", "requested_ns")
_STRS = ("approval_id", "session_id", "tool", "call_digest")


def decode_record(key: bytes, value: bytes) -> tuple[str, str, Any]:
    """``(kind, name, what it holds)`` of one record; :class:`CorruptRecord` naming it if it does not decode."""
    where = "grants/" + key.decode(errors="replace")
    try:
        kind, _, name = key.decode().partition("/")
    except UnicodeDecodeError as exc:
        raise CorruptRecord(where, f"the key is not UTF-8 ({exc})") from None
    try:
        data = msgpack.unpackb(value, raw=False)
    except Exception as exc:  # FormatError, ExtraData, StackError, ValueError…: every undecodable byte string
        said = f": {exc}" if str(exc) else ""
        raise CorruptRecord(where, f"not msgpack ({type(exc).__name__}{said}; {len(value)} bytes, starting "
                                   f"{value[:8].hex()})") from None
    try:
        return kind, name, _checked(kind, name, data)
    except (TypeError, ValueError, KeyError) as exc:
        raise CorruptRecord(where, f"not a {kind} record: {type(exc).__name__}: {exc}") from None


def _checked(kind: str, name: str, data: Any) -> Any:
    if kind == "posture":
        return Posture(data).value
    if kind == "rules":
        if not isinstance(data, list) or not all(isinstance(text, str) for text in data):
            raise TypeError("rules are a list of texts")
        return tuple(data)
    if kind == "approval":
        return _approval(name, data)
    return data  # the policy (rewritten at start) and anything this code does not know: left as they are


def _approval(name: str, data: Any) -> Approval:
    if not isinstance(data, dict):
        raise TypeError(f"an approval is a map, not {type(data).__name__}")
    for field in _STRS:
        if not isinstance(data.get(field), str):
            raise TypeError(f"{field} is {type(data.get(field)).__name__}, not a text")
    for field in _INTS:
        if type(data.get(field)) is not int:
            raise TypeError(f"{field} is {type(data.get(field)).__name__}, not an integer")
    if data["approval_id"] != name:
        raise ValueError(f"approval_id {data['approval_id']!r} is not the key's {name!r}")
    if data.get("status") not in _STATUSES:
        raise ValueError(f"status {data.get('status')!r} is not one of {sorted(_STATUSES)}")
    answerers, refusals = data.get("answerers"), data.get("refusals", [])
    if not isinstance(answerers, list) or not all(isinstance(a, str) for a in answerers):
        raise TypeError("answerers are a list of texts")
    if not isinstance(refusals, list) or not all(isinstance(r, str) for r in refusals):
        raise TypeError("refusals are a list of texts")
    fields = {**data, "answerers": tuple(answerers), "refusals": tuple(refusals)}
    fields.setdefault("arguments", None)
    fields.setdefault("policy", None)  # an approval recorded before policies were bound
    return Approval(**fields)  # an unknown field: TypeError


def unreadable_for(corrupt: Iterable[str], session_id: str) -> list[str]:
    """The corrupt records (their keys in the grants database) that could change ``session_id``'s decisions: its
    posture, the user and workspace rules, its own session rules. Sorted; empty when there is none."""
    affecting = {f"posture/{session_id}", f"rules/{Scope.SESSION.value}/{session_id}",
                 *(f"rules/{scope.value}" for scope in Scope if scope not in (Scope.NODE, Scope.SESSION))}
    return sorted(key for key in corrupt if key in affecting)
