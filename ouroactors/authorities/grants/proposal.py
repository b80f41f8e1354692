"""What an approval keeps and shows of a call's arguments: all of them, or a bounded view that still binds them.

An approval stores the arguments it was asked about and shows them to the operator, so the grants door bounds them
(:data:`~.messages.MAX_ARGUMENTS_BYTES`). A coding agent's ``write`` or ``edit`` of a few kilobytes was over that
bound: the request was refused at the door, the coordinator asked again at every drain, and the session stayed
``running`` for ever with its call never put to anybody (found using the CLI with a large write).

:func:`shown` is the one rule, applied by the runtime to the proposal it emits (``approval_needed``), asks grants
about and looks its answer up by: arguments within the bound are kept whole (every approval asked before is
unchanged); over it, each long string is replaced by ``{"$elided": {"bytes", "sha256", "head"}}`` — its size, the
SHA-256 of its UTF-8 bytes and its first characters, for the operator to read — and if even that is over the bound,
the whole is (its canonical encoding's size and SHA-256). The call digest every party computes is over the view,
and the view carries the SHA-256 of what it leaves out: an approval still binds every byte of the call, and a call
whose content differs by one byte is not the approved one. The full arguments stay in the journal's ``tool_call``
record and the session's ``tool_call`` event.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ...core.codec import _pack
from .messages import MAX_ARGUMENTS_BYTES

ELIDED = "$elided"
LONG_BYTES = 200  # a string longer than this (UTF-8) is elided from a view that must shrink
HEAD_CHARS = 160  # how much of an elided string the operator reads


def _size(value: Any) -> int:
    return len(_pack(value, "arguments"))


def _elided(text: str) -> dict[str, Any]:
    data = text.encode("utf-8", "surrogatepass")
    return {ELIDED: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "head": text[:HEAD_CHARS]}}


def _shrunk(value: Any) -> Any:
    if isinstance(value, str):
        return _elided(value) if len(value.encode("utf-8", "surrogatepass")) > LONG_BYTES else value
    if isinstance(value, dict):
        return {key: _shrunk(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_shrunk(item) for item in value]
    return value


def _is_marker(key: Any) -> bool:
    return isinstance(key, str) and key.startswith("$") and key.lstrip("$") == ELIDED[1:]


def _has_marker(value: Any) -> bool:
    if isinstance(value, dict):
        return any(_is_marker(key) or _has_marker(item) for key, item in value.items())
    if isinstance(value, list | tuple):
        return any(_has_marker(item) for item in value)
    return False


def _escaped(value: Any) -> Any:
    """``value`` with every key that reads as a marker (``$elided``, ``$$elided``, …) given one more ``$``: a call
    whose arguments spell out another call's view literally must not share its digest (and so its approval)."""
    if isinstance(value, dict):
        return {("$" + key if _is_marker(key) else key): _escaped(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_escaped(item) for item in value]
    return value


def shown(arguments: Any) -> Any:
    """``arguments`` as an approval keeps them: whole within :data:`~.messages.MAX_ARGUMENTS_BYTES` encoded, else
    the bounded view the module docstring describes (deterministic: the same arguments, the same view; two different
    arguments, two different views — a literal marker key is escaped first)."""
    if _has_marker(arguments):
        arguments = _escaped(arguments)
    if _size(arguments) <= MAX_ARGUMENTS_BYTES:
        return arguments
    view = _shrunk(arguments)
    if _size(view) <= MAX_ARGUMENTS_BYTES:
        return view
    packed = _pack(arguments, "arguments")
    return {ELIDED: {"bytes": len(packed), "sha256": hashlib.sha256(packed).hexdigest(), "head": ""}}


__all__ = ["ELIDED", "shown"]
