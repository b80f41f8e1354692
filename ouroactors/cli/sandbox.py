"""``ouroactors sandbox``: inspect the command sandbox (bubblewrap) and its network proxy on this machine."""

from __future__ import annotations

import sys

import click

from ..runtime.netproxy import resolve
from ..runtime.sandbox import describe, probe
from ..runtime.sandbox_fs import system_view
from ..runtime.sandbox_netpolicy import NetworkPolicy, NetworkPolicyError, check_name, decide
from . import main


@main.group()
def sandbox() -> None:
    """The command sandbox (bubblewrap)."""


@sandbox.command("check")
@click.option("--bwrap", "bwrap_path", type=str, default=None, help="probe this bwrap binary instead of PATH's")
@click.option("--view", "show_view", is_flag=True, help="also list the read-only host view a command sees")
def check(bwrap_path: str | None, show_view: bool) -> None:
    """Probe bwrap once with the exact flags commands use; exit 0 if it works here, else 1."""
    found = probe(bwrap_path)
    click.echo(describe(found))
    if show_view:
        for entry in system_view():
            click.echo(f"view: {entry.path}" + (f" -> {entry.target}" if entry.kind == "symlink" else ""))
    sys.exit(0 if found.available else 1)


@sandbox.command("net-check")
@click.argument("destination")
@click.option("--domain", "domains", multiple=True, help="a granted domain pattern (repeatable; default *)")
@click.option("--private", "private", multiple=True, help="a network or host allowed to be non-public")
def net_check(destination: str, domains: tuple[str, ...], private: tuple[str, ...]) -> None:
    """Would the sandbox proxy let a command reach DESTINATION (host or host:port)? Exit 0 if allowed, 1 if not."""
    host, _, port_text = destination.rpartition(":") if destination.count(":") == 1 else (destination, "", "")
    if not port_text.isdigit() and port_text:
        raise click.BadParameter(f"bad port {port_text!r}", param_hint="DESTINATION")
    port = int(port_text or 443)
    try:
        policy = NetworkPolicy(domains or ("*",), private)
    except NetworkPolicyError as exc:
        raise click.BadParameter(str(exc), param_hint="--domain/--private")
    named = check_name(host, port, policy)
    addresses = resolve(host, port) if named.allowed else []
    verdict = decide(host, port, addresses, policy) if named.allowed else named
    click.echo(f"{policy.describe()}: {host}:{port} -> {', '.join(addresses) or 'not resolved'}")
    click.echo(("allowed: " if verdict.allowed else "refused: ") + verdict.reason)
    sys.exit(0 if verdict.allowed else 1)
