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
    host, port = split_destination(destination)
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


def split_destination(text: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` (port 443 when none): the host and the port, or a usage
    error (exit 2) naming what is wrong — an empty host, a port that is not a number in 1–65535."""
    if text.startswith("["):
        inside, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise click.BadParameter(f"{text!r}: an IPv6 address is written [ADDRESS] or [ADDRESS]:PORT",
                                     param_hint="DESTINATION")
        host, port_text, has_port = inside, rest[1:], bool(rest)
    elif text.count(":") == 1:
        (host, _, port_text), has_port = text.partition(":"), True
    else:
        host, port_text, has_port = text, "", False
    if not host.strip():
        raise click.BadParameter(f"{text!r} names no host", param_hint="DESTINATION")
    if has_port and not (port_text.isascii() and port_text.isdigit() and 1 <= int(port_text) <= 65535):
        raise click.BadParameter(f"bad port {port_text!r}: a number from 1 to 65535", param_hint="DESTINATION")
    return host, int(port_text or 443)

