"""A worker class that only ``test_admin_door`` names, and only by its path: no process imports this module before a
supervisor spawns it (the admin door, which imports nothing, cannot tell its kind)."""

from __future__ import annotations

from ouroactors import Worker


class Plain(Worker):
    pass
