"""The ``ouroactors`` command: run trees, inspect and steer a running system, the demo.

Exit codes: 0 clean stop · 2 bad input (tree file, arguments, data dir in use) · 3 the tree failed
to start · 4 the tree ended on its own (escalation or auto_shutdown) · 5 the system is unreachable.

**Start-up cost.** Every call used to import the whole framework (thespian, pydantic models, rich) before
parsing its arguments: ~0.9 s for ``--version``. Commands now live in their modules and are imported only
when invoked: :data:`COMMANDS` names each command's module and its one-line help, so ``--help`` lists them
without importing any (a test keeps the table equal to the commands' own docstrings).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
from pathlib import Path
from typing import Any

import click

from .. import __version__

DATA_DIR_HELP = "the system's data directory (default: the tree file's, else .ouroactors)"

# command -> (module under ouroactors.cli that registers it on ``main``, its one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "approvals": ("authorities", "Durable approvals: list them and answer as a verified operator."),
    "ask": ("messaging", "Ask the actor at PATH with MESSAGE (a JSON literal) and print its answer."),
    "chaos": ("chaos", "Seeded chaos on TREE_FILE: random kills, storage faults and delays; every invariant checked."),
    "events": ("inspect", "The supervision events (reads the event log; works even if the system is gone)."),
    "faults": ("faults", "Fault plans: where and how to fail (see `faults points`)."),
    "grants": ("grants", "Permission rules and postures: list them; add and revoke user, workspace and session rules."),
    "journal": ("journal", "Session journals: verify the hash chain, replay through the loop, show the records."),
    "kill": ("control", "SIGKILL the process of the actor at PATH (fault injection by hand)."),
    "ledger": ("authorities", "The write-ahead effect ledger: list, show and settle effects."),
    "logs": ("logs", "The actors' log lines (<data dir>/admin.out): the last ones, or followed as they are written."),
    "metrics": ("inspect", "Supervision metrics in the Prometheus text format."),
    "restart": ("control", "Terminate the child at PATH if it runs, then start it again (OTP restart_child)."),
    "run": ("run", "Boot TREE_FILE and serve it until Ctrl-C, SIGTERM or `ouroactors stop`."),
    "sandbox": ("sandbox", "The command sandbox (bubblewrap)."),
    "start-child": ("control",
                    "Start a dynamic child of a simple_one_for_one supervisor with extra ARGS (JSON literals)."),
    "status": ("inspect", "One line per tree, and children counted by status."),
    "session": ("session", "Durable agent sessions: create, message, follow their committed events, control them."),
    "stop": ("control", "Stop the system serving DATA_DIR: trees in reverse order, then every process."),
    "storage": ("authorities", "The storage authority (the node's LMDB environment)."),
    "tell": ("messaging",
             "Send the actor at PATH the MESSAGE (a JSON literal) and return; its answer, if any, is dropped."),
    "terminate": ("control", "Terminate the child at PATH (OTP terminate_child); its spec is kept unless temporary."),
    "tree": ("inspect", "The tree: path, status, pid, generation, restarts, last exit."),
    "workspace": ("workspace", "Workspace leases and worktrees: who holds which root; an operator's worktree cleanup."),
}


class _LazyGroup(click.Group):
    """A group whose commands are imported on first use (see the module docstring)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            importlib.import_module(f"{__name__}.{COMMANDS[cmd_name][0]}")
        return self.commands.get(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        limit = formatter.width - 6 - max(len(name) for name in self.list_commands(ctx))
        rows = []
        for name in self.list_commands(ctx):
            if name in self.commands:
                rows.append((name, self.commands[name].get_short_help_str(limit)))
            else:
                rows.append((name, click.utils.make_default_short_help(COMMANDS[name][1], limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _console() -> Any:
    from .common import make_console

    return make_console()


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="ouroactors")
def main() -> None:
    """OTP-grade supervision trees for Python actors on thespian."""
    # the current directory's modules import here, as `run` imports a tree's actors (config.project_import_path):
    # an answer of the user's own type (`ouroactors ask` run from the project) unpickles. Last on the path: an
    # installed package still wins.
    with contextlib.suppress(OSError):  # (a directory removed under the shell: nothing to add)
        if (here := os.getcwd()) not in sys.path:
            sys.path.append(here)


@main.command()
@click.option("--base", type=click.Choice(["multiproc", "simple"]), default="multiproc", show_default=True)
@click.option("--data-dir", type=click.Path(file_okay=False), default=".ouroactors/demo", show_default=True)
@click.option("--no-kill", is_flag=True, help="skip the step that SIGKILLs the runtime mid-effect")
@click.option("--keep", is_flag=True, help="leave the system up (detached) so the printed commands work")
def demo(base: str, data_dir: str, no_kill: bool, keep: bool) -> None:
    """Run a durable agent session end to end: approval, SIGKILL mid-effect, recovery, journal, shutdown."""
    from .demo import run_demo

    sys.exit(run_demo(_console(), base, Path(data_dir), kill=not no_kill, keep=keep))


@main.command()
@click.argument("tree_file", type=click.Path(dir_okay=False))
def check(tree_file: str) -> None:
    """Validate a tree file without starting anything."""
    from ..core.errors import SpecError
    from ..system.config import load_tree

    console = _console()
    try:
        tree = load_tree(tree_file)
    except SpecError as exc:
        console.print(str(exc), style="red", markup=False, highlight=False)
        sys.exit(2)
    count = _count(tree.tree)
    console.print(f"{tree_file}: ok — root {tree.tree.id!r}, {count} children, base {tree.system.base}",
                  markup=False)


def _count(spec: object) -> int:
    children = getattr(spec, "children", None) or ()
    return sum(1 + _count(child) for child in children)


__all__ = ["COMMANDS", "main"]
