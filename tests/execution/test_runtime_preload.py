"""The execution supervisor probes bubblewrap once, before it forks any runtime, and every runtime inherits the probe.

A runtime is a fresh process for each message a session gets; each used to probe bwrap itself when it opened (it runs
bwrap twice: ~15 ms), on the message's clock. A ``bwrap`` wrapper first on the system's PATH logs every call with its
parent's pid: the probe is the one call with ``--version``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ouroactors.runtime import sandbox
from ouroactors.sessions import Sessions

from ..coordinator.actor_support import agent_tree, wait_for

pytestmark = [pytest.mark.multiproc,
              pytest.mark.skipif(not sandbox.probe().available, reason="bubblewrap does not work here")]


def logging_bwrap(directory: Path) -> Path:
    """A ``bwrap`` in ``directory`` that appends ``<parent pid> <args>`` to ``directory/calls``, then runs bwrap."""
    real = shutil.which("bwrap")
    assert real is not None
    calls = directory / "calls"
    wrapper = directory / "bwrap"
    wrapper.write_text(f'#!/bin/sh\necho "$PPID $*" >> {calls}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return calls


def test_runtimes_inherit_the_probe_the_execution_supervisor_made(actor_system_factory, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch):
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    calls = logging_bwrap(wrappers)
    monkeypatch.setenv("PATH", f"{wrappers}{os.pathsep}{os.environ['PATH']}")  # the system's processes inherit it
    sandbox.clear_probe_cache()  # nor may they inherit a probe this process made (of the real bwrap)
    system = actor_system_factory()
    system.start_tree(agent_tree(str(tmp_path), rules={"user": ["allow:Bash(true)"]}))
    sessions = Sessions(system)
    ws = tmp_path / "ws"
    ws.mkdir()
    for sid in ("s1", "s2"):
        script = tmp_path / f"{sid}.json"
        script.write_text(json.dumps({"turns": [
            {"events": [{"kind": "tool_call", "id": f"{sid}c0", "name": "shell", "arguments": {"command": "true"}}]},
            {"events": [{"kind": "text", "text": "done"}]}]}))
        sessions.new(sid, {"workspace": str(ws), "sandbox": {"mode": "bwrap"},
                           "model": {"kind": "scripted", "script": str(script)}})
        sessions.send(sid, "go")
        wait_for(f"{sid} suspended after its turn", lambda sid=sid: sessions.show(sid).state == "suspended")
    lines = [line.split(" ", 1) for line in calls.read_text().splitlines()]
    probes = [parent for parent, args in lines if args.strip() == "--version"]
    commands = [parent for parent, args in lines if args.rstrip().endswith("-c true")]
    execution = str(system.child_info("agent/execution").pid)
    assert probes == [execution], lines  # once, by the supervisor: no runtime probed for itself
    assert len(commands) == 2 and execution not in commands, lines  # the tool calls ran in bwrap, from the runtimes
