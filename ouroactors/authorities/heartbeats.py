"""What an authority that watches its holders by heartbeat does with a refused one.

The workspace pings its lease owners and the ledger its effect runners, each ``Addressed`` to the holder's worker
generation. A holder that died leaves its port to whoever binds it next; a worker that got it refuses the addressed
ping with a :class:`~ouroactors.core.errors.StaleGeneration`, which comes back here. That refusal is the expected
news of a death, not an error: no answer refreshes the holder, and the next heartbeat round finds it gone as one
that does not answer. A refusal from anyone this authority does not watch was asked by nobody here, and says so.
"""

from __future__ import annotations

import logging
from typing import Any

from ..core.errors import StaleGeneration


def note_refused_heartbeat(log: logging.Logger, path: str, holder: str | None, sender: Any,
                           refusal: StaleGeneration) -> None:
    """Log ``refusal`` from ``sender``: ``holder`` names the watched holder at that address (e.g. ``owner w-3``),
    None when nothing here watches it."""
    if holder is not None:
        log.info("%s: the heartbeat to %s was refused by %s: its port is another worker's now", path, holder,
                 refusal.authority)
    else:
        log.warning("%s: a refusal nothing here asked for, from %s: %s", path, sender, refusal)
