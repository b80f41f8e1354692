"""Authorities with their door removed, to show what the door protects (tests only).

Imported by path inside the actor processes of ``test_message_boundary``.
"""

from __future__ import annotations

from ouroactors.authorities.grants.actor import Grants
from ouroactors.authorities.ledger.actor import Ledger


class DoorlessGrants(Grants):
    protocol = ()  # no message is checked before its handler runs
    stamped_only = False


class DoorlessLedger(Ledger):
    protocol = ()
    stamped_only = False
