"""A damaged LMDB environment, said as one: what the commands that read the data dir's files themselves (``journal
…``, ``session export``) answer when LMDB finds its pages are not what it wrote, instead of a traceback.

A tamper-detection tool meets damage as a matter of course (a disk that lost bytes, a copy cut short, a hand that
edited ``data.mdb``): it names the environment, what LMDB said, and what to do, and exits 1 — ``journal verify``'s
"the history does not follow" — with nothing written.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any, NoReturn, TypeVar

from .common import DEFAULT_DATA_DIR, get_console

F = TypeVar("F", bound=Callable[..., Any])

# LMDB's errors that say the environment's pages are not what it wrote: the data is damaged, not the request
DAMAGE = frozenset({"CorruptedError", "PageNotFoundError", "InvalidError", "PanicError", "VersionMismatchError",
                    "BadChecksumError", "BadTxnError", "BadDbiError", "BadValsizeError"})


def store_damaged(data_dir: str, problem: str, *, damaged: bool = True) -> NoReturn:
    """Say that the LMDB environment of ``data_dir`` is damaged (or, not ``damaged``, cannot be read), naming
    ``problem``, and exit 1."""
    from ..authorities.storage.env import StorageConfig

    where = StorageConfig.under(data_dir).path
    text = (f"the LMDB environment in {where} is damaged: {problem}: restore it from a backup (`ouroactors storage "
            "backup` writes one)") if damaged else f"the LMDB environment in {where} cannot be read: {problem}"
    get_console(stderr=True).print(text, style="red", markup=False, highlight=False)
    sys.exit(1)


def lmdb_error(exc: BaseException) -> BaseException | None:
    """The ``lmdb.Error`` that ``exc`` is, holds (an exception group: a trio nursery's) or was raised from."""
    import lmdb

    seen: set[int] = set()
    stack = [exc]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, lmdb.Error):
            return item
        if isinstance(item, BaseExceptionGroup):
            stack.extend(item.exceptions)
        stack.extend(e for e in (item.__cause__, item.__context__) if e is not None)
    return None


def reports_damaged_store(func: F) -> F:
    """Under :func:`.common.reports_errors`, on a command that reads the LMDB files of its ``data_dir``: an LMDB
    error met there is :func:`store_damaged` (exit 1), not a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            found = lmdb_error(exc)
            if found is None:
                raise
            store_damaged(str(kwargs.get("data_dir", DEFAULT_DATA_DIR)), f"{type(found).__name__}: {found}",
                          damaged=type(found).__name__ in DAMAGE)

    return wrapper  # type: ignore[return-value]


__all__ = ["DAMAGE", "lmdb_error", "reports_damaged_store", "store_damaged"]
