"""Exit reasons: why an incarnation of a child ended.

The vocabulary is OTP's, made explicit: ``normal``, ``shutdown``, ``shutdown(info)``,
``crash(type, message, traceback digest)`` and ``killed``. A reason is a small frozen value that
pickles across processes and renders to JSON for events. Whether a reason is *abnormal* (and so
restarts a transient child) is decided here and nowhere else.
"""

from __future__ import annotations

import hashlib
import traceback as _tb
from dataclasses import dataclass
from enum import Enum
from typing import Any


class ExitKind(str, Enum):
    NORMAL = "normal"
    SHUTDOWN = "shutdown"
    CRASH = "crash"
    KILLED = "killed"
    IGNORE = "ignore"  # OTP's ``ignore`` from init: the child was not started, its spec is kept


@dataclass(frozen=True)
class ExitReason:
    """Why an incarnation ended.

    ``info`` carries ``shutdown(info)``'s payload (a string); crash reasons carry the exception
    type, its message and a digest of the traceback (the full text goes to the log, not into
    events, so events stay small and comparable).
    """

    kind: ExitKind
    info: str | None = None
    exc_type: str | None = None
    message: str | None = None
    traceback_digest: str | None = None
    where: str | None = None  # a crash: the innermost frame, ``file:line in function`` (the user's code)

    @property
    def is_normal_exit(self) -> bool:
        """OTP's "normal" exits: ``normal``, ``shutdown`` and ``{shutdown, _}``.

        A transient child is restarted only when its exit is *not* one of these.
        """
        return self.kind in (ExitKind.NORMAL, ExitKind.SHUTDOWN)

    def __str__(self) -> str:
        if self.kind is ExitKind.SHUTDOWN and self.info is not None:
            return f"shutdown({self.info})"
        if self.kind is ExitKind.CRASH:
            at = f" at {self.where}" if self.where else ""
            return f"crash({self.exc_type}: {self.message}{at} [{self.traceback_digest}])"
        if self.kind is ExitKind.KILLED and self.info is not None:
            return f"killed({self.info})"
        return self.kind.value

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value}
        for name in ("info", "exc_type", "message", "traceback_digest", "where"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExitReason:
        return cls(
            kind=ExitKind(data["kind"]),
            info=data.get("info"),
            exc_type=data.get("exc_type"),
            message=data.get("message"),
            traceback_digest=data.get("traceback_digest"),
            where=data.get("where"),
        )


NORMAL = ExitReason(ExitKind.NORMAL)
SHUTDOWN = ExitReason(ExitKind.SHUTDOWN)
KILLED = ExitReason(ExitKind.KILLED)


def normal() -> ExitReason:
    return NORMAL


def shutdown(info: str | None = None) -> ExitReason:
    return SHUTDOWN if info is None else ExitReason(ExitKind.SHUTDOWN, info=info)


def ignore() -> ExitReason:
    """``on_start`` answered :data:`~ouroactors.supervision.worker.IGNORE`: not started, not a failure."""
    return ExitReason(ExitKind.IGNORE)


def killed(info: str | None = None) -> ExitReason:
    return KILLED if info is None else ExitReason(ExitKind.KILLED, info=info)


def crash(exc: BaseException) -> ExitReason:
    """The reason for an unhandled exception; the traceback is reduced to a stable digest."""
    text = "".join(_tb.format_exception(type(exc), exc, exc.__traceback__))
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:16]
    frames = _tb.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else None
    return ExitReason(
        ExitKind.CRASH,
        exc_type=f"{type(exc).__module__}.{type(exc).__qualname__}",
        message=str(exc)[:500],
        traceback_digest=digest,
        where=where,
    )


def crash_of(exc_type: str, message: str, traceback_digest: str = "") -> ExitReason:
    """A crash reason built from parts (tests and remote reports)."""
    return ExitReason(ExitKind.CRASH, exc_type=exc_type, message=message, traceback_digest=traceback_digest)
