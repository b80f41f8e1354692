"""``ouroactors session …``: durable agent sessions on a running system with the agent tree.

The same operations as :mod:`ouroactors.sessions` (which this wraps). ``events`` prints committed
events only — each line is part of the session's durable history — so ``--after C`` resumes exactly
after cursor C whatever restarted in between, and ``--follow`` waits for more without polling faster
than the directory's long poll. Approvals are answered as the operator whose credentials are in the
data dir (grants verifies them).

Every argument that becomes a field of a session message is held to that field's rules where it is typed
(:class:`MessageField`, over :func:`ouroactors.core.boundary.check_field`: the door's own checks): a bad one is a
usage error naming the option, before any system is reached.
"""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path
from typing import Any

import click

from ..core.boundary import check_field
from ..core.errors import BadRequest, OuroactorsError
from ..runtime.coordinator import messages as m
from ..runtime.coordinator.workflow import State
from . import main
from .common import MessageField, connect_client, console, data_dir_option, not_nan, reports_errors
from .session_text import EventLines, ended_text
from .visible import visible


class TextField(MessageField):
    """A message's text: the argument itself, or ``-`` for standard input (a prompt kept in a file, or longer than
    the 128 KiB one argument may be). Read as UTF-8; one line end at its end (what ``echo`` adds) is not part of
    the message. The text read is checked as an argument is."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if value == "-":
            value = _read_stdin_text(param, ctx)
        return super().convert(value, param, ctx)


def _read_stdin_text(param: click.Parameter | None, ctx: click.Context | None) -> str:
    cap = m.MAX_PROMPT_BYTES + 2  # and a line end
    data = sys.stdin.buffer.read(cap + 1)
    if len(data) > cap:
        raise click.BadParameter(f"standard input holds more than {cap} bytes; a message's text is at most "
                                 f"{m.MAX_PROMPT_BYTES} bytes of UTF-8", ctx, param)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise click.BadParameter(f"standard input is not UTF-8 text: byte {exc.start} is "
                                 f"{data[exc.start]:#04x}", ctx, param) from None
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text


SESSION_ID = MessageField(m.ShowSession, "session_id")
VERSION = MessageField(m.CompleteJob, "expected_version", click.INT)


def _result(text: str | None) -> Any:
    """``complete-job --result``: JSON the door takes (no NaN or Infinity, not nested past the parser, bounded)."""
    if text is None:
        return None

    def no_constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON value a result may hold")

    try:
        value = json.loads(text, parse_constant=no_constant)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError; RecursionError: nested too deep
        problem = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise click.BadParameter(f"not JSON: {problem}", param_hint="'--result'") from None
    try:
        return check_field(m.CompleteJob, "result", value)
    except BadRequest as bad:
        raise click.BadParameter(bad.problem, param_hint="'--result'") from None


PRINCIPAL_ENV = "OUROACTORS_PRINCIPAL"  # act for this principal instead of the local user …
PRINCIPAL_TOKEN_ENV = "OUROACTORS_PRINCIPAL_TOKEN"  # … with its token (never on the command line, where ps shows it)


def _sessions(data_dir: str, *, follow_direct: bool = False) -> Any:
    import os

    from ..sessions import Sessions

    # the data dir of the system reached (its files: the committed log, the operator's credentials)
    return Sessions(connect_client(data_dir), follow_direct=follow_direct,
                    principal=os.environ.get(PRINCIPAL_ENV) or None, token=os.environ.get(PRINCIPAL_TOKEN_ENV) or None)


def _config(config_file: str | None, workspace: str | None, sandbox: str | None, script: str | None
            ) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if config_file is not None:
        try:
            config = tomllib.loads(Path(config_file).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise click.BadParameter(f"{config_file}: {exc}", param_hint="--config") from None
        given = config.get("workspace")
        if workspace is None and isinstance(given, str) and not given.strip():  # refused here, before any system
            raise click.BadParameter(f"{config_file}: workspace: got {given!r}; the session's workspace is a "
                                     "directory: give it as --workspace DIR, or workspace = \"DIR\" here",
                                     param_hint="--config")
    if workspace is not None:
        config["workspace"] = str(Path(workspace).resolve())
    if sandbox is not None:
        config.setdefault("sandbox", {})["mode"] = sandbox
    if script is not None:
        config["model"] = {"kind": "scripted", "script": str(Path(script).resolve())}
    return config


@main.group()
def session() -> None:
    """Durable agent sessions: create, message, follow their committed events, control them."""


@session.command("new")
@data_dir_option
@click.argument("session_id", required=False, type=SESSION_ID)
@click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True), default=None,
              help="the session's TOML table (model, tools, sandbox, workspace, limits, pins)")
@click.option("--workspace", type=click.Path(file_okay=False, exists=True), default=None)
@click.option("--sandbox", type=click.Choice(["bwrap", "none"]), default=None)
@click.option("--script", type=click.Path(dir_okay=False, exists=True), default=None,
              help="a scripted model's turns (default: the embedded demo script)")
@reports_errors
def session_new(data_dir: str, session_id: str | None, config_file: str | None, workspace: str | None,
                sandbox: str | None, script: str | None) -> None:
    """Create a session (suspended until its first message) and start its coordinator."""
    config = _config(config_file, workspace, sandbox, script)
    from ..runtime.execution.config import parse_session_config

    parse_session_config(config, config_file or "the session's options")  # here first: no system needed to refuse it
    try:  # and as the request will carry it (encodable, not too large), named as the user gave it
        check_field(m.NewSession, "config", config)
    except BadRequest as bad:
        raise click.BadParameter(f"the session's configuration {bad.problem}",
                                 param_hint="--config" if config_file else "the session's options") from None
    view = _sessions(data_dir).new(session_id, config)
    console.print(view.session_id, markup=False, highlight=False)


@session.command("send")
@data_dir_option
@click.argument("session_id", type=SESSION_ID)
@click.argument("text", type=TextField(m.SendMessage, "text"))
@click.option("--expected-version", type=VERSION, default=None,
              help="refuse unless the session is still at this state version")
@click.option("--last", is_flag=True, help="the session completes when this turn settles")
@click.option("--event-id", type=MessageField(m.SendMessage, "event_id"), default=None,
              help="idempotency key: a send retried with the same id (after a timeout, say) is refused as a "
                   "duplicate instead of starting a second turn")
@reports_errors
def session_send(data_dir: str, session_id: str, text: str, expected_version: int | None, last: bool,
                 event_id: str | None) -> None:
    """Send a message: it starts the next turn (the session must be suspended). TEXT `-` reads it from standard
    input (`ouroactors session send s1 - < task.md`)."""
    done = _sessions(data_dir).send(session_id, text, expected_version=expected_version, last=last,
                                    event_id=event_id)
    console.print(f"{session_id}: {done.view.state} (version {done.view.state_version})", markup=False)
    _, noted, note = done.detail.partition("; ")  # what the answer adds: the retried message's turn runs, or the
    if noted:  # message whose turn never started will not run
        console.print(f"  {note}", markup=False, highlight=False)


@session.command("steer")
@data_dir_option
@click.argument("session_id", type=SESSION_ID)
@click.argument("text", type=TextField(m.SteerSession, "text"))
@reports_errors
def session_steer(data_dir: str, session_id: str, text: str) -> None:
    """Add a message to the running turn: delivered before its next model call (a `steered` event says which).
    Answered once the runtime has journaled it, so a runtime lost first leaves it to the turn's re-run; refused
    when the turn has no point left to take it (send a message instead). A turn that stops before its next model
    call still puts it in the conversation, for the next turn. TEXT `-` reads it from standard input."""
    _sessions(data_dir).steer(session_id, text)
    console.print(f"{session_id}: steered", markup=False)


@session.command("events")
@data_dir_option
@click.argument("session_id", type=SESSION_ID)
@click.option("--after", type=MessageField(m.ReadEvents, "after", click.INT), default=0, show_default=True,
              help="start after this cursor (at most the session's committed cursor)")
@click.option("--follow", is_flag=True, help="wait for more until the session ends (or --until, --idle)")
@click.option("--until", default=None, help="with --follow: stop after an event of this kind (e.g. turn_settled)")
@click.option("--idle", type=click.FloatRange(0), default=None, callback=not_nan,
              help="with --follow: stop after this many seconds "
              "without an event")
@click.option("--json", "as_json", is_flag=True, help="one JSON object per line")
@reports_errors
def session_events(data_dir: str, session_id: str, after: int, follow: bool, until: str | None,
                   idle: float | None, as_json: bool) -> None:
    """Committed events after --after, in cursor order, each once."""
    # this process starts no system: it may read the durable log itself, woken by whoever commits to it
    sessions = _sessions(data_dir, follow_direct=True)
    # how to answer an approval is said while the session waits on one, not under an answered or a cancelled one
    lines = EventLines(lambda text: click.echo(visible(text), nl=False), session_id,  # (see .visible)
                       waiting=lambda: sessions.show(session_id).state == State.WAITING_APPROVAL.value)
    last_kind = None
    try:
        for event in _refusing_ahead(sessions.events(session_id, after, follow=follow, idle_timeout=idle,
                                                     until=until)):
            last_kind = event.kind
            if as_json:
                click.echo(json.dumps({"cursor": event.cursor, "kind": event.kind, "turn": event.turn,
                                       "generation": event.generation, "data": event.data}, default=repr))
            else:
                lines.event(event.cursor, event.kind, event.turn, event.data)
    finally:
        lines.end()
    if follow and not as_json and (until is None or last_kind != until) and (end := ended_text(
            sessions.show(session_id))):  # the follow ended: say why when the session did
        click.echo(visible(end))


def _refusing_ahead(events: Any) -> Any:
    """``events``, with an ``--after`` beyond the session's committed cursor a usage error naming the option (its
    events up to there would never be shown: the ones committed next take those cursors)."""
    from ..runtime.coordinator.errors import CursorAhead

    try:
        yield from events
    except CursorAhead as exc:
        raise click.BadParameter(str(exc), param_hint="'--after'") from None


version_option = click.option("--expected-version", type=VERSION, default=None,
                              help="the state version you decided at (refused, and recorded, if it moved on)")


def _answer(data_dir: str, session_id: str, approval_id: str, approve: bool, reason: str | None,
            expected_version: int | None) -> None:
    api = _sessions(data_dir)
    answer = api.approve if approve else api.deny
    answered = answer(session_id, approval_id, reason, expected_version=expected_version)
    console.print(f"{answered.approval_id}: {answered.status} by {answered.answered_by}", markup=False)


@session.command("approve")
@data_dir_option
@click.argument("session_id", type=SESSION_ID)
@click.argument("approval_id", type=MessageField(m.ApprovalAnswered, "approval_id"))
@click.option("--reason", default=None)
@version_option
@reports_errors
def session_approve(data_dir: str, session_id: str, approval_id: str, reason: str | None,
                   expected_version: int | None) -> None:
    """Approve the session's pending approval APPROVAL_ID as the data dir's operator.

    APPROVAL_ID is the approval's id (approval-…) or the id of the wait that `session show` names (ask.vN.…,
    which pins the state version and the call): both are printed by `session show`."""
    _answer(data_dir, session_id, approval_id, True, reason, expected_version)


@session.command("deny")
@data_dir_option
@click.argument("session_id", type=SESSION_ID)
@click.argument("approval_id", type=MessageField(m.ApprovalAnswered, "approval_id"))
@click.option("--reason", default=None)
@version_option
@reports_errors
def session_deny(data_dir: str, session_id: str, approval_id: str, reason: str | None,
                   expected_version: int | None) -> None:
    """Deny the session's pending approval APPROVAL_ID (its id, or the wait id `session show` names) as the data
    dir's operator."""
    _answer(data_dir, session_id, approval_id, False, reason, expected_version)


@session.command("wait")
@data_dir_option
@click.argument("session_id", type=SESSION_ID)
@click.argument("text", type=TextField(m.WaitSession, "text"))
@click.option("--seconds", type=MessageField(m.WaitSession, "seconds", click.FLOAT), default=None,
              help="wait on a durable timer this long (at most 366 days)")
@click.option("--job", "job_id", type=MessageField(m.WaitSession, "job_id"), default=None,
              help="wait until this external job is completed (complete-job)")
@click.option("--expires", "expires_s", type=MessageField(m.WaitSession, "expires_s", click.FLOAT), default=None,
              help="with --job: the job expires this many seconds from now (default: a day); the session is then "
                   "suspended with the reason, and a later completion is refused")
@reports_errors
def session_wait(data_dir: str, session_id: str, text: str, seconds: float | None, job_id: str | None,
                 expires_s: float | None) -> None:
    """Make a suspended session wait on a timer or an external job; its next turn then starts with TEXT.

    The wait is durable: no runtime runs meanwhile, and it survives restarts. TEXT `-` reads it from standard
    input."""
    if (seconds is None) == (job_id is None):
        raise click.UsageError("give exactly one of --seconds or --job")
    if expires_s is not None and job_id is None:
        raise click.UsageError("--expires is for a job wait (--job); a timer is its own expiry")
    done = _sessions(data_dir).wait(session_id, text, seconds=seconds, job=job_id, expires=expires_s)
    console.print(f"{session_id}: {done.detail} ({done.view.state}, version {done.view.state_version})",
                  markup=False)


@session.command("complete-job")
@data_dir_option
@click.argument("session_id", type=SESSION_ID)
@click.argument("job_id", type=MessageField(m.CompleteJob, "job_id"))
@click.option("--result", default=None, help="the job's result, as JSON")
@click.option("--event-id", type=MessageField(m.CompleteJob, "event_id"), default=None,
              help="idempotency key: the same id twice is refused as a duplicate")
@version_option
@reports_errors
def session_complete_job(data_dir: str, session_id: str, job_id: str, result: str | None, event_id: str | None,
                         expected_version: int | None) -> None:
    """Complete the external job JOB_ID the session waits on: a checked resume event; the next turn runs."""
    value = _result(result)
    done = _sessions(data_dir).complete_job(session_id, job_id, value, event_id=event_id,
                                            expected_version=expected_version)
    console.print(f"{session_id}: {done.detail} ({done.view.state}, version {done.view.state_version})",
                  markup=False)


def _control(data_dir: str, session_id: str, action: str) -> None:
    api = _sessions(data_dir)
    done = getattr(api, action)(session_id)
    console.print(f"{session_id}: {done.detail} ({done.view.state}, version {done.view.state_version})",
                  markup=False)


for _action, _help in (("cancel", "Cancel the session: a running turn is interrupted (its end published), its "
                                  "runtime stopped; the session is history."),
                       ("suspend", "Suspend a running session: its turn is interrupted (its end published: "
                                   "turn_settled interrupted) and its runtime stopped; resume runs the message again "
                                   "as the next turn."),
                       ("resume", "Resume a suspended session's interrupted turn, or retry a parked recovery.")):
    def _make(action: str, help_text: str) -> None:
        @session.command(action, help=help_text)
        @data_dir_option
        @click.argument("session_id", type=SESSION_ID)
        @reports_errors
        def command(data_dir: str, session_id: str) -> None:
            _control(data_dir, session_id, action)

    _make(_action, _help)

__all__ = ["OuroactorsError", "session"]


@session.command("add-principal")
@data_dir_option
@click.argument("name", type=MessageField(m.SendMessage, "principal"))
@reports_errors
def session_add_principal(data_dir: str, name: str) -> None:
    """Give principal NAME a new token (replacing its old one) and print it once: requests act for NAME with
    OUROACTORS_PRINCIPAL=NAME and OUROACTORS_PRINCIPAL_TOKEN=<token> (the local user needs none)."""
    from ..runtime.coordinator.principals import add_principal
    from ..runtime.coordinator.record import check_id

    try:
        check_id(name, "NAME")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
    Path(data_dir).mkdir(parents=True, exist_ok=True, mode=0o700)
    console.print(add_principal(data_dir, name), markup=False, highlight=False)


from . import session_export as session_export  # noqa: E402  registers `session export` on the group above
from . import session_serve as session_serve  # noqa: E402  registers `session serve` on the group above
from . import session_views as session_views  # noqa: E402  registers `session list|show|artifacts` on it
