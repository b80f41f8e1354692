"""A reconciler for the ledger actor tests (imported inside the ledger's process by path).

The "world" an ``example`` effect touched is a file named by the entry's ``cause``: when it exists
the effect demonstrably happened, and its content is the evidence (think: a pull request found by
its idempotency marker). No file: nothing can be proven, the entry stays ambiguous.
"""

from __future__ import annotations

from pathlib import Path

from ouroactors.authorities.ledger.actor import Verdict
from ouroactors.authorities.ledger.domain import Entry


def reconcile(entry: Entry) -> Verdict | None:
    if entry.cause is None:
        return None
    marker = Path(entry.cause)
    if not marker.exists():
        return None
    return Verdict("ok", {"marker": str(marker), "found": marker.read_text(), "key": entry.idempotency_key})


def broken(entry: Entry) -> Verdict | None:
    raise OSError("the world cannot be asked right now")
