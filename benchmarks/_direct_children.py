"""Child processes of ``bench_ledger``'s processes row: one direct ledger writer per process.

They are started with the ``spawn`` context (an LMDB environment must never cross ``fork``), so the
function lives at module level in an importable module. Each child opens its own
:class:`~ouroactors.authorities.ledger.direct.LedgerWriter` on the node's data dir, then, for every
round, waits on the shared barrier (the parent passes it too, so process start-up is not timed),
records ``count`` starts and puts ``(index, round, error, transactions, records)`` on ``done``.
"""

from __future__ import annotations

from typing import Any

ROUND_TIMEOUT_S = 120.0  # between rounds the parent measures its own baseline


def record_starts(data_dir: str, index: int, tag: str, count: int, rounds: int, barrier: Any, done: Any) -> None:
    from ouroactors.authorities.ledger.direct import LedgerWriter
    from ouroactors.authorities.ledger.messages import LedgerAnswer
    from ouroactors.authorities.storage.env import StorageConfig, close_env

    from .bench_ledger import request

    try:
        writer = LedgerWriter(data_dir, watch=True)
        for rnd in range(rounds):
            barrier.wait(ROUND_TIMEOUT_S)
            error = None
            for i in range(count):
                answer = writer.record_started(request(f"{tag}-{index}-{rnd}", i))
                if error is None and not (isinstance(answer, LedgerAnswer) and answer.answer == "created"):
                    error = f"child {index}: bad answer {answer!r}"
            done.put((index, rnd, error, writer.transactions, writer.records))
    except BaseException as exc:  # the parent reports it (and stops waiting)
        done.put((index, -1, f"child {index}: {exc!r}", 0, 0))
        barrier.abort()
    finally:
        close_env(StorageConfig.under(data_dir))
