"""What a worker's incarnation started ends with it, as an Erlang port closes when its owner exits.

A worker that starts a subprocess (a server on a port, a watcher, a build) and then crashes or is stopped left it
running: the next incarnation met it — could not bind that port, say, and crashed until its supervisor gave up —
and it lived on until the whole system stopped. So when a worker ends (a crash, ``stop()``, its supervisor's
``terminate_child``, a group restart), past its ``on_stop`` — where it may stop its own gracefully — every process
below its own is SIGKILLed, and every other process of its process group (what left the tree while it lived:
``cmd &`` whose shell exited), pinned by pidfds first so that no reused pid is hit. Spared: forked copies of the
worker's process (an actor thespian forked from it, a ``multiprocessing`` child), whose ends thespian and their owner
see to.
Only where the worker has a process of its own (not the in-process base, where its process is the caller's). A
worker SIGKILLed outright cannot do this: its supervisor ends what is left of its process group instead (every actor
process leads one: :func:`ouroactors.core.procs.end_orphaned_group`), which also takes what escaped the process tree
while the worker lived (``cmd &`` whose shell exited); only a process that started a session of its own escapes.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ..core import procs

log = logging.getLogger("ouroactors.worker")


def end_leftovers(context: Any, path: str) -> list[int]:
    """End every process the worker at ``path`` (running in this process, under ``context``) left behind; their
    pids (none on the in-process base)."""
    if getattr(context, "base", None) != "multiproc":  # one process per actor only: elsewhere it is the caller's
        return []
    ended = procs.end_descendants(os.getpid(), spare=procs.forked_copy)
    ended += procs.end_own_group(spare=procs.forked_copy)  # what left the tree but not the worker's group
    if ended:
        log.info("%s: ended %d process(es) it had started and left running", path, len(ended))
    return ended


__all__ = ["end_leftovers"]
