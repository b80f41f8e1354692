"""A worker that answers an instance of a class only its own process can import, for :mod:`.test_undecodable`.

``"ghost"`` makes a module ``ghost_of_the_worker`` in the worker's process (in ``sys.modules`` only) and answers an
instance of its class ``Ghost``: it pickles by reference, and no other process can import it. Any other message is
answered ``("got", type name)``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from ouroactors.supervision.worker import Worker

GHOSTS = "tests.actor.ghosts:Ghosts"


def ghost_module(name: str) -> Any:
    """A module ``name`` with a class ``Ghost``, importable in this process only (registered in ``sys.modules``)."""
    module = types.ModuleType(name)
    exec("class Ghost:\n    def __init__(self, n):\n        self.n = n\n", module.__dict__)
    module.Ghost.__module__ = name
    sys.modules[name] = module
    return module


class Ghosts(Worker):
    def on_message(self, message: Any, sender: Any) -> Any:
        if message == "ghost":
            return [1, ghost_module("ghost_of_the_worker").Ghost(7)]
        return ("got", type(message).__name__)
