"""A worker whose module notes, when it is imported, the process that imported it (``test_preload.py``).

The file is named by ``OUROACTORS_TEST_IMPORT_LOG`` in the environment the actor system was started with.
"""

from __future__ import annotations

import os

from ouroactors import Worker

_LOG = os.environ.get("OUROACTORS_TEST_IMPORT_LOG")
if _LOG:
    with open(_LOG, "a", encoding="ascii") as fh:
        fh.write(f"{os.getpid()}\n")


class Probe(Worker):
    """Does nothing: what matters is where its module was imported."""
