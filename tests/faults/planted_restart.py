"""TEST-ONLY: a ledger with a planted *restart* bug, for proving simulated kills find it.

:class:`PresumesFailed` recovers like the real ledger (every entry still ``started`` becomes
``ambiguous``) and then, in its own transaction, presumes each of those failed: ``failed``,
settled by ``recovery``. Only a restart of the ledger (its own death, or storage's under
rest_for_one) while an effect is between its start and its settlement shows it, and only when the
effect did reach the world: then the ledger says ``failed`` of an effect that ran (invariant 2,
``ambiguous-not-failed``). Without kills no ledger restarts mid-effect, so nothing finds it.
"""

from __future__ import annotations

from typing import Any

import lmdb

from ouroactors.authorities.ledger.actor import Ledger
from ouroactors.authorities.ledger.domain import RESTARTED_BEFORE_SETTLEMENT, Status
from ouroactors.authorities.storage.commit import Committed, write
from ouroactors.core import clock
from ouroactors.core.codec import encode

PRESUMES_FAILED_LEDGER = "tests.faults.planted_restart:PresumesFailed"
PRESUMED = "presumed failed: unsettled when the ledger restarted"


class PresumesFailed(Ledger):
    """The real ledger, except that what its recovery made ambiguous it then calls failed."""

    def on_start(self, *args: Any, **kwargs: Any) -> None:
        began = clock.time_ns()
        super().on_start(*args, **kwargs)
        if not self.recovered_ambiguous:
            return
        store = self.store

        def presume(txn: lmdb.Transaction) -> int:
            count = 0
            for key, raw in list(txn.cursor(db=store.entries)):
                entry = store._decode(txn, key, raw)
                if (entry is None or entry.status is not Status.AMBIGUOUS
                        or entry.reason != RESTARTED_BEFORE_SETTLEMENT or (entry.settled_ns or 0) < began):
                    continue
                failed = entry.model_copy(update={"status": Status.FAILED, "reason": PRESUMED,
                                                  "settled_by": "recovery"})
                txn.put(key, encode(failed), db=store.entries)
                count += 1
            return count

        outcome = write(self.env, presume, fence=store.fence)
        if not isinstance(outcome, Committed):
            raise RuntimeError(f"planted bug: could not presume failures: {outcome}")
