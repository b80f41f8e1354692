"""``ouroactors grants …``: the permission rules and postures the grants authority keeps, read and changed.

Node rules come from the tree file only (``kwargs.rules.node`` of the grants child); the user, workspace and session
scopes are stored by the authority, durable across restarts, and changed here. A rule is checked here first, by the
authority's own parser, so a typo is a usage error naming the rule before anything is sent; the authority checks it
again (it serves other callers). Every change is a request stamped with the authority's generation
(:func:`~ouroactors.authorities.asking.ask_authority`), like every other authority command.

A posture or session rule is for a session that exists: one for an unknown id (a typo, or a session not created
yet) is refused, exit 2 naming it, and nothing is stored — a session created later under that id starts with none.

What a change does to running sessions: an added rule or a posture applies to the next decision (runtimes decide on
the authority's durable state). A revoked rule changes the authority's generation, so everything after grants in the
agent tree restarts (rest_for_one) and no effect admitted under the revoked rule can start afterwards.
"""

from __future__ import annotations

import json
from typing import Any

import click

from ..authorities.asking import ask_authority
from ..authorities.grants.messages import SetPosture
from . import main
from .common import MessageField, connect_client, console, data_dir_option, reports_errors
from .visible import visible

SCOPES = ("user", "workspace", "session")
POSTURES = ("default", "plan", "read_only")

path_option = click.option("--at", "actor_path", default=None, help="tree path of the grants authority")
scope_option = click.option("--scope", type=click.Choice(SCOPES), default=None,
                            help="where the rules go (default: user; session with --session)")
# a session id as sessions are named, checked as the authority's door checks it: nothing is kept for a session that
# cannot exist
SESSION_ID = MessageField(SetPosture, "session_id")
session_option = click.option("--session", "session_id", type=SESSION_ID, default=None,
                              help="the session whose rules these are")


@main.group()
def grants() -> None:
    """Permission rules and postures: list them; add and revoke user, workspace and session rules."""


def _scope(scope: str | None, session_id: str | None) -> str:
    """The scope a change names: ``--session`` alone means the session scope; a session only with it."""
    if session_id is not None and scope not in (None, "session"):
        raise click.UsageError(f"--session names one session's rules: it goes with --scope session, not {scope!r}")
    chosen = scope or ("session" if session_id is not None else "user")
    if chosen == "session" and session_id is None:
        raise click.UsageError("session rules apply to one session: name it with --session")
    return chosen


def _checked(rules: tuple[str, ...], scope: str) -> tuple[str, ...]:
    """The rules as given, once the authority's parser has read each (a usage error naming the first it refuses)."""
    from ..authorities.grants.rules import RuleError, new_rules

    try:
        new_rules(rules, scope)
    except RuleError as bad:
        raise click.UsageError(f"{bad} (a rule reads like allow:Bash(pytest *), deny:Write(.env) or "
                               "ask:WebFetch(domain:*.example.com))") from None
    return rules


def _policy(client: Any, actor_path: str | None) -> dict[str, Any]:
    found = client.ask(actor_path or "agent/grants", "rules")  # a read: no stamp needed
    if not isinstance(found, dict) or not isinstance(found.get("rules"), dict):
        raise click.ClickException(f"the grants authority answered {found!r} to a rules read")
    return found


@grants.command("list")
@data_dir_option
@path_option
@session_option
@click.option("--json", "as_json", is_flag=True, help="one JSON object: rules by scope, postures by session")
@reports_errors
def grants_list(data_dir: str, actor_path: str | None, session_id: str | None, as_json: bool) -> None:
    """Every scope's rules (node, user, workspace, each session's) and the sessions' postures; with --session,
    what applies to that session."""
    policy = _policy(connect_client(data_dir), actor_path)
    rules: dict[str, list[str]] = policy["rules"]
    postures: dict[str, str] = policy.get("postures") or {}
    if session_id is not None:
        rules = {k: v for k, v in rules.items() if not k.startswith("session/") or k == f"session/{session_id}"}
        postures = {session_id: postures.get(session_id, "default")}
    if as_json:
        click.echo(json.dumps({"rules": rules, "postures": postures}, sort_keys=True))
        return
    for scope, texts in rules.items():
        console.print(f"{visible(scope, keep='')}:", markup=False, highlight=False)
        for text in texts or ["(none)"]:
            console.print(f"  {visible(text, keep='')}", markup=False, highlight=False)
    if postures:
        console.print("postures:", markup=False, highlight=False)
        for session, posture in postures.items():
            console.print(f"  {visible(session, keep='')}: {posture}", markup=False, highlight=False)
    console.print("deny > ask > allow; a request no rule matches is ask", markup=False, highlight=False)


def _rule_change(func: Any) -> Any:
    """The options and argument every rule change takes (``add``, ``revoke``)."""
    for option in (reports_errors, click.argument("rules", nargs=-1, required=True), session_option, scope_option,
                   path_option, data_dir_option):
        func = option(func)
    return func


def _where(scope: str | None, session_id: str | None) -> tuple[str, str]:
    """The scope a change names (see :func:`_scope`) and where the authority keeps its rules (``session/<id>``)."""
    chosen = _scope(scope, session_id)
    return chosen, f"session/{session_id}" if chosen == "session" else chosen


@grants.command("add")
@_rule_change
def grants_add(data_dir: str, actor_path: str | None, scope: str | None, session_id: str | None,
               rules: tuple[str, ...]) -> None:
    """Add RULES (e.g. 'allow:Bash(pytest *)') to a scope; they apply to the next decision."""
    from ..authorities.grants.actor import AddRules

    chosen, where = _where(scope, session_id)
    stored = ask_authority(connect_client(data_dir), actor_path or "agent/grants",  # session rules: for one that exists
                           AddRules(chosen, _checked(rules, chosen), session_id, session_must_exist=True))
    console.print(f"{where}: " + ("; ".join(stored) if stored else "(none)"), markup=False, highlight=False)


@grants.command("revoke")
@_rule_change
def grants_revoke(data_dir: str, actor_path: str | None, scope: str | None, session_id: str | None,
                  rules: tuple[str, ...]) -> None:
    """Revoke RULES from a scope: the authority's generation changes, and what runs after it in the tree restarts."""
    from ..authorities.grants.actor import RevokeRules

    chosen, where = _where(scope, session_id)
    client = connect_client(data_dir)
    held = _policy(client, actor_path)["rules"].get(where, [])
    missing = [r for r in rules if r not in held]
    if missing:  # nothing is revoked (nor anything restarted) for a rule the scope does not hold
        raise click.UsageError(f"{where} holds no rule {missing[0]!r} (it holds: {'; '.join(held) or 'none'})")
    ask_authority(client, actor_path or "agent/grants", RevokeRules(chosen, rules, session_id))
    console.print(f"{where}: revoked {'; '.join(rules)} (the grants generation changed: sessions' runtimes restart)",
                  markup=False, highlight=False)


@grants.command("posture")
@data_dir_option
@path_option
@click.argument("session_id", type=SESSION_ID)
@click.argument("posture", type=click.Choice(POSTURES))
@reports_errors
def grants_posture(data_dir: str, actor_path: str | None, session_id: str, posture: str) -> None:
    """Set SESSION's posture: plan refuses writes and commands, read_only everything but reads; default leaves
    every request to the rules."""
    done = ask_authority(connect_client(data_dir), actor_path or "agent/grants",
                         SetPosture(session_id, posture, session_must_exist=True))  # a typo protects nothing: refused
    console.print(f"{session_id}: posture {done}", markup=False, highlight=False)
