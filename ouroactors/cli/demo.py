"""``ouroactors demo``: the agent runtime end to end, on real processes, narrated.

It boots supervision_trees/agent.toml's tree (storage, ledger, grants, workspace, execution,
coordinator, sessions) on the multiproc base, creates a git workspace beside the data dir and runs
one scripted session through the coordinator: the model reads NOTES.md, edits it (no rule covers
the edit, so it asks; the demo answers as the data dir's verified operator), runs a grep, and then
a slow shell command during which the demo SIGKILLs the runtime. The coordinator's recovery finds
the effect ``ambiguous`` in the ledger and parks the session rather than guess; the operator looks
at the workspace, settles the effect with the real ``ouroactors ledger settle`` command and
resumes; a replacement runtime re-runs the interrupted turn (the ledger runs no recorded effect
twice) and, the message having been sent as the last one, the session completes. ``journal
verify`` and ``journal replay`` then check its history, and the shutdown leaves no process behind.

``--base simple`` is refused (exit 2): the runtime and coordinator must be real processes to be
killed and recovered, and the simple base runs every actor in this one process.

Every step says what happened, why it matters and the command that shows it; the commands are
printed exactly as they run (``--data-dir`` included). With ``--keep`` the system is started
detached and left up so they work afterwards; ``--no-kill`` skips the SIGKILL step.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from shlex import quote
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..core.errors import OuroactorsError
from ..core.procs import left_behind
from ..system.handle import ActorSystem
from ..system.marker import DataDirInUse
from . import demo_agent as setup

T = TypeVar("T")
STEP_TIMEOUT_S = 20.0


class Narrator:
    """Prints a step's facts, why they matter, and the command that shows them (exactly as it runs)."""

    def __init__(self, console: Console, data_dir: Path, *, keep: bool = True) -> None:
        self.console, self.data_dir, self.keep = console, data_dir, keep

    def command(self, *words: str) -> str:
        return " ".join(["ouroactors", *(quote(w) for w in words), "--data-dir", quote(str(self.data_dir))])

    def step(self, title: str) -> None:
        if self.console.width <= 160:
            self.console.rule(Text(title, style="bold"))
        else:  # not a terminal: a rule as wide as the console (100,000 columns when piped) would be noise
            self.console.print(f"\n── {title} " + "─" * max(3, 76 - len(title)), style="bold", markup=False,
                               highlight=False)

    def said(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False)

    def why(self, text: str) -> None:
        self.console.print(f"why it matters: {text}", style="italic dim", markup=False, highlight=False)

    def see(self, *words: str, live: bool = True) -> None:
        """The command that shows what was just said. ``live``: it asks the running system, which is gone when
        the demo ends unless it runs with ``--keep``, so without it the line says so instead of promising."""
        if live and not self.keep:
            self.console.print(f"  with the system kept up (demo --keep): {self.command(*words)}", style="cyan",
                               markup=False, highlight=False)
            return
        self.console.print(f"  see it yourself: {self.command(*words)}", style="cyan", markup=False, highlight=False)

    def skipped(self, what: str, reason: str) -> None:
        self.console.print(f"SKIPPED {what}: {reason}", style="bold yellow", markup=False, highlight=False)


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = STEP_TIMEOUT_S) -> T:
    """Poll another process's durable state until ``probe`` answers, with a deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except OuroactorsError as exc:  # the authority asked may be restarting: ask again until the deadline
            last = exc
        else:
            if last:
                return last
        time.sleep(0.05)  # polling with a deadline
    raise OuroactorsError(f"{what}: not within {timeout:g}s (last: {last!r})")


def cli(*words: str, data_dir: Path) -> subprocess.CompletedProcess[str]:
    """Run an ``ouroactors`` command as printed, in a process of its own (as a user would)."""
    argv = [sys.executable, "-m", "ouroactors.cli", *words, "--data-dir", str(data_dir)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def show_cli(n: Narrator, done: subprocess.CompletedProcess[str]) -> None:
    for line in (done.stdout + done.stderr).strip().splitlines():
        n.said(f"  │ {line}")


def run_demo(console: Console, base: str, data_dir: Path, *, kill: bool = True, keep: bool = False) -> int:
    if base != "multiproc":
        console.print(f"the agent demo needs the multiproc base (given: {base!r}): its runtime and coordinator "
                      "are real processes that the demo SIGKILLs and recovers; the simple base runs everything "
                      "in this one process", style="red", markup=False, highlight=False)
        return 2
    n = Narrator(console, data_dir, keep=keep)
    n.step("ouroactors demo: a durable agent session, end to end")
    started = time.monotonic()
    workspace = setup.workspace_for(data_dir)
    try:
        tree = setup.agent_tree(workspace.resolve())
        system = ActorSystem.start("multiproc", data_dir, detached=keep)
    except DataDirInUse as exc:
        console.print(f"{exc}\na system (a kept demo?) still serves it: {n.command('stop')}", style="red",
                      markup=False, highlight=False)
        return 2
    except OuroactorsError as exc:
        console.print(str(exc), style="red", markup=False, highlight=False)
        return 2
    pgid, mark = system.pgid, system.lineage_mark
    code = 1
    try:
        code = _run(n, system, tree, workspace, kill=kill, keep=keep)
    except OuroactorsError as exc:
        console.print(f"the demo stopped: {type(exc).__name__}: {exc}", style="red", markup=False, highlight=False)
        code = 1
    finally:
        if not keep or code != 0:
            _shutdown(n, system)
    if keep and code == 0:
        n.step("the system stays up (--keep)")
        n.said(f"every command above works now; the demo took {time.monotonic() - started:.1f} s")
        n.said(f"stop it with: {n.command('stop')}")
        return 0
    if left := left_behind(pgid, mark):
        console.print(f"processes were left behind: {', '.join(map(str, left))}", style="red")
        return 1
    n.said(f"no process left behind (session {pgid} is empty, and no program carries the system's mark); the demo took "
           f"{time.monotonic() - started:.1f} s")
    n.said(f"to keep the system up and try the commands: ouroactors demo --keep --data-dir {quote(str(data_dir))}")
    return code


def _shutdown(n: Narrator, system: ActorSystem) -> None:
    n.step("7. shutdown: every tree stopped in reverse start order, then every process")
    mark = system.mark()
    system.shutdown()
    stopped = [e.path for e in system.events.all()[mark:] if e.kind == "terminated"]
    n.said(f"terminated {len(stopped)} actors: {', '.join(stopped)}")
    n.see("events", live=False)  # the event log is a file: it reads the same after the system is gone


def _run(n: Narrator, system: ActorSystem, tree: Any, workspace: Path, *, kill: bool, keep: bool) -> int:
    from ..sessions import Sessions
    from .demo_steps import Demo

    n.step("1. boot the agent tree")
    t0 = time.monotonic()
    system.start_tree(tree)
    n.said(f"supervision_trees/agent.toml booted on multiproc in {time.monotonic() - t0:.2f} s, one OS process "
           f"per actor, data dir {system.data_dir}:")
    table = Table("child", "status", "pid")
    for path, info in system.walk("agent"):
        table.add_row(path, info.status, str(info.pid or "-"))
    n.console.print(table)
    n.why("storage, ledger, grants and workspace are authorities under rest_for_one: when one restarts, "
          "everything that depends on it restarts after it with the new generation")
    n.see("tree")
    demo = Demo(n, system, Sessions(system), workspace)
    demo.prepare(kill)
    demo.session()
    demo.approval()
    if kill:
        demo.kill_and_recover()
    else:
        n.skipped("step 5 (SIGKILL mid-effect and recovery)", "--no-kill")
    demo.finish()
    demo.journal()
    demo.close(keep)
    return 0


__all__ = ["Narrator", "cli", "run_demo", "show_cli", "wait_for"]
