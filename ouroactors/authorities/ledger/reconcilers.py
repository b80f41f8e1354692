"""Reconcilers the ledger has for every tree: effects whose kind changes nothing outside the session.

A reconciler settles an ``ambiguous`` entry by finding out what its effect did. For most kinds that means asking
the world (the ``http`` tool's asks the target by idempotency key) and, when the world cannot say, the entry stays
ambiguous for an operator. A ``read`` effect (the ``read`` and ``list`` tools) has nothing to find out: reading a
file or listing a directory changes nothing, so whether it ran before its runtime died does not matter to anyone —
only its result was lost, with the runtime. :func:`nothing_to_reconcile` settles it ``failed`` (the result was
never delivered; a re-run turn tells the model so, and it may read again), with evidence saying why. Without it, a
runtime killed in the middle of a read parked its session until an operator settled an effect that had no effect.

The ledger registers :data:`DEFAULT_RECONCILERS` under whatever a tree configures (``kwargs.reconcilers``); a
tree may replace this one by naming the kind itself.
"""

from __future__ import annotations

from .domain import Entry
from .messages import Verdict

READ_KIND = "read"


def nothing_to_reconcile(entry: Entry) -> Verdict:
    """A ``read`` effect: settled ``failed`` — its result was lost, and it changed nothing to look for."""
    return Verdict("failed", {
        "reconciled": True, "effect_class": "read",
        "finding": "a read changes nothing outside the session: its result was lost with the runtime that ran it, "
                   "and reading again is safe",
    })


DEFAULT_RECONCILERS = {READ_KIND: f"{__name__}:nothing_to_reconcile"}

__all__ = ["DEFAULT_RECONCILERS", "READ_KIND", "nothing_to_reconcile"]
