"""``ouroactors session serve``: follow sessions over HTTP, as server-sent events (see
:mod:`ouroactors.runtime.coordinator.sse` for the protocol and :mod:`~ouroactors.runtime.coordinator.sse_server`
for the server)."""

from __future__ import annotations

import os
import secrets
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

import click

from .common import choices_hint, console, data_dir_option, reports_errors
from .session import session


def _write_token(target: Path, token: str) -> None:
    """The token, readable by this user only (0600 from the start), put in place atomically (a new token replaces
    the last run's: that one is dead)."""
    fd, tmp = tempfile.mkstemp(prefix=".token-", dir=target.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(token + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


@session.command("serve")
@data_dir_option
@click.option("--host", default="127.0.0.1", show_default=True, help="a loopback address to bind (nothing else)")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="the port (0: any free one, printed)")
@click.option("--token-file", type=click.Path(dir_okay=False), default=None,
              help="where the access token is written, 0600 (default: DATA_DIR/serve.token)")
@reports_errors
def session_serve(data_dir: str, host: str, port: int, token_file: str | None) -> None:
    """Serve the committed events of this data dir's sessions as server-sent events until Ctrl-C or SIGTERM:
    GET /sessions/ID/events[?after=C&until=KIND], each event's id its cursor (a reconnecting EventSource resumes
    after Last-Event-ID with no gap and no duplicate).

    Every request needs the token this command writes to --token-file (a new one each run): `Authorization: Bearer
    TOKEN`, or `?access_token=TOKEN` for a browser's EventSource. Reads the data dir, with the system up or down."""
    from ..authorities.storage.env import StorageConfig
    from ..runtime.coordinator.sse_server import SessionEventServer

    if not (Path(StorageConfig.under(data_dir).path) / "data.mdb").is_file():
        raise click.BadParameter(f"{data_dir}: no ouroactors data here{choices_hint(data_dir)}",
                                 param_hint="--data-dir")
    token = secrets.token_urlsafe(32)
    try:
        server = SessionEventServer(data_dir, host, port, token)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--host") from None
    target = Path(token_file) if token_file is not None else Path(data_dir) / "serve.token"
    stop = threading.Event()

    def stopping(signum: int, frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, stopping) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        _write_token(target, token)
        where = f"[{host}]" if ":" in host else host
        console.print(f"serving the sessions of {data_dir} on http://{where}:{server.server_port}/sessions/ID/events "
                      f"(token in {target}); Ctrl-C stops", markup=False, highlight=False)
        serving = threading.Thread(target=server.serve_forever, name="sse-serve", daemon=True)
        serving.start()
        stop.wait()
    finally:
        server.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        try:
            if target.read_text().strip() == token:  # ours still (another run may have put its own there)
                target.unlink()
        except OSError:
            pass


__all__ = ["session_serve"]
