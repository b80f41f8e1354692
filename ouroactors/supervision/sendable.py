"""An answer that cannot reach its asker, turned into one that can.

Between processes every message is pickled by the sending process's transport. An answer that does not pickle (a
lambda, a generator, a lock), or whose pickle is over the frame cap (``OUROACTORS_MAX_FRAME_BYTES``, 64 MiB), made
thespian drop it as "poison" in the worker's log, and an answer that pickles but does not unpickle (an exception
whose ``__init__`` does not take the ``args`` it passed to ``Exception``: a common slip in a custom refusal) was
dropped by the asker's transport. Either way the asker heard nothing and waited out its
whole timeout, with nothing in the event log: the request had been handled, only its answer was lost.

The worker marks the send of an answer (``sending.path``, around :meth:`~.answering.Answering.answer_asker`); the
transport's serializer (``system._patches``) asks :func:`replacement` when pickling or framing failed and
:func:`checked` once it pickled, and sends what they return instead:
:class:`~ouroactors.core.errors.UnsendableAnswer`, inside the request's :class:`~.calls.TaggedAnswer` when it came
tagged. Only answers are replaced — a request or tell that does
not pickle is no answer to anybody, and fails as before. The round trip of :func:`checked` is made for exception
answers only (refusals, crash reports: small, and the usual way an answer fails to unpickle); a successful answer
costs one thread-local read and nothing more.
"""

from __future__ import annotations

import logging
import pickle
import threading
from typing import Any

from ..core.errors import UnsendableAnswer
from .calls import TaggedAnswer

log = logging.getLogger("ouroactors.worker")


class _Sending(threading.local):
    path: str | None = None  # the worker whose answer this thread is sending (set around the send, then None)


sending = _Sending()


def _value(message: Any) -> Any:
    return message.value if isinstance(message, TaggedAnswer) else message


def replacement(message: Any, error: BaseException) -> Any | None:
    """What to send instead of the answer ``message`` that failed to pickle or unpickle with ``error`` (None: it
    is no answer; the send fails as it would have)."""
    path = sending.path
    if path is None:
        return None
    value = _value(message)
    log.error("%s: its answer (%s) cannot be sent between processes; the asker gets UnsendableAnswer", path,
              type(value).__qualname__, exc_info=(type(error), error, error.__traceback__))
    substitute = UnsendableAnswer(path, type(value).__qualname__, f"{type(error).__name__}: {error}")
    return TaggedAnswer(message.ref, substitute) if isinstance(message, TaggedAnswer) else substitute


def checked(message: Any, body: bytes) -> Any | None:
    """For an exception answer whose pickle is ``body``: what to send instead if ``body`` does not unpickle (None:
    it does, or ``message`` is no exception answer)."""
    if sending.path is None or not isinstance(_value(message), BaseException):
        return None
    try:
        pickle.loads(body)
    except Exception as error:
        return replacement(message, error)
    return None


__all__ = ["checked", "replacement", "sending"]
