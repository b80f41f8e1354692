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
while the worker lived (``cmd &`` whose shell exited), and every program that carries the worker's lineage mark in
its environment (:mod:`ouroactors.core.procs`): what started a session of its own too. A
supervisor SIGKILLed outright takes its children with it (parent-death signal): the supervisor above it ends what
they left, found by their starts in the event log (:func:`end_subtree_leftovers`); the tree host does so for a root.
A worker's own end reads the marks (every process's environment) only when the worker has started a program at all
(:func:`~ouroactors.core.procs.started_programs`: one system call says no), so a large tree's stop does not pay a
scan per child for workers that started nothing; what started a daemon that called ``setsid`` (``redis-server
--daemonize yes``) finds it by its mark.
"""

from __future__ import annotations

import json
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
    if ended or procs.started_programs():  # what left the group too, for a session of its own (setsid'd daemon)
        ended += procs.end_own_marked()
    if ended:
        log.info("%s: ended %d process(es) it had started and left running", path, len(ended))
    return ended


def log_offset(context: Any) -> int | None:
    """Where the system's event log ends now, before a supervisor is forked: every start below it is logged after
    this (None where actors share a process, or the log cannot be read)."""
    if getattr(context, "base", None) != "multiproc":
        return None
    try:
        return os.path.getsize(context.events_path)
    except OSError:
        return None


def end_after_kill(context: Any, path: str, pid: int, offset: int | None) -> list[int]:
    """What the actor at ``path`` (its process ``pid``, SIGKILLed from outside) left running — its process group's
    rest and the programs that carry its mark, and with ``offset`` (a supervisor's :func:`log_offset`) what the
    actors below it left — ended, with a warning naming the pids; the pids ended."""
    ended = _end_left_by(pid)
    if offset is not None:  # a supervisor: its children died with it, and so could end nothing
        ended += end_subtree_leftovers(context, path, offset)
    if ended:
        logging.getLogger("ouroactors.supervisor").warning(
            "%s: ended %d process(es) its incarnation left running when it was killed (pids %s)",
            path, len(ended), ", ".join(map(str, ended)))
    return ended


def end_subtree_leftovers(context: Any, path: str, offset: int, wait_s: float = 2.0) -> list[int]:
    """What the actors below the supervisor at ``path`` left running, that supervisor having been SIGKILLed from
    outside: the pids ended.

    Its children died with it (each asks for SIGKILL at its parent's death) and could end nothing themselves; each
    led a process group, and its start is in the event log after ``offset`` (:func:`log_offset`, taken before the
    supervisor was forked) with its pid. Those processes are awaited (they are being killed), then what is left in
    each one's group is ended (:func:`~ouroactors.core.procs.end_orphaned_group`: never while a process of that
    pid lives)."""
    pids = _started_below(context.events_path, offset, path + "/", context.node)
    procs.await_gone(pids, wait_s)
    ended: list[int] = []
    for pid in pids:
        ended += _end_left_by(pid)
    return ended


def _end_left_by(pid: int) -> list[int]:
    """What the dead actor process ``pid`` left: the rest of its process group, then what carries its lineage mark
    (left the group and the session: ``start_new_session=True``, ``setsid``, a sandboxed command). Neither while
    a process of that pid lives."""
    ended = procs.end_orphaned_group(pid)
    if (system := os.environ.get(procs.SYSTEM_MARK)) is not None:
        ended += procs.end_marked(system, actor=pid)
    return ended


def _started_below(events_path: str, offset: int, prefix: str, node: str) -> list[int]:
    """The pids of the ``started`` events of this node logged after ``offset`` for a path below ``prefix``."""
    pids: dict[int, None] = {}
    try:
        with open(events_path, "rb") as log_file:
            log_file.seek(offset)
            for line in log_file:
                if b'"started"' not in line:
                    continue
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a line being written, or torn: the reader of the log reports it
                pid = event.get("pid")
                if (event.get("kind") == "started" and str(event.get("path", "")).startswith(prefix)
                        and event.get("node") == node and type(pid) is int and pid > 0):
                    pids[pid] = None
    except OSError:
        return []
    return list(pids)


__all__ = ["end_after_kill", "end_leftovers", "end_subtree_leftovers", "log_offset"]
