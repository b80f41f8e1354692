"""TEST-ONLY: a ledger with a planted bug, for proving the checkers catch it.

:class:`AnswersBeforeCommit` decides every request (in a write transaction it then aborts), sends
the answers — ``created`` — and only then commits. Between the two there is a fault point, and any
storage fault or kill at or before the commit loses an entry whose effect the caller already ran:
invariant 1 ("no effect without a committed start") broken on purpose.
"""

from __future__ import annotations

import logging

from ouroactors.authorities.ledger.actor import Ledger
from ouroactors.authorities.ledger.messages import answer_for
from ouroactors.authorities.storage.commit import Committed
from ouroactors.core import faults

log = logging.getLogger("tests.faults.planted")

ANSWERED = faults.register_point("planted.ledger.answered", "test-only buggy ledger: answered, not yet committed")
PLANTED_LEDGER = "tests.faults.planted:AnswersBeforeCommit"


class AnswersBeforeCommit(Ledger):
    """The real ledger, except that it answers before it commits (the planted bug)."""

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        self._pending_ops = 0
        if not pending:
            return
        ops = [op for item in pending for op in item.ops]
        txn = self.env.begin(write=True)
        try:
            decided = [self.store._apply_one(txn, op) for op in ops]  # decisions only ...
        finally:
            txn.abort()  # ... nothing written yet
        results = iter(decided)
        for item in pending:
            answers = [answer_for(next(results)) for _ in item.ops]
            self.answer_asker(item.sender, answers if item.batch else answers[0])  # the bug: answered first
        faults.point(ANSWERED)
        outcome = self.store.apply(ops)
        if not isinstance(outcome, Committed):
            log.warning("planted bug: answered %d request(s) whose commit then failed: %s", len(ops), outcome)
