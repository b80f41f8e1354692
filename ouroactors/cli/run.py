"""``ouroactors run TREE``: boot a tree, show it live, stop it in order on Ctrl-C or SIGTERM."""

from __future__ import annotations

import faulthandler
import os
import select
import shlex
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

import click
from rich.console import Group
from rich.live import Live
from rich.text import Text

from ..core.errors import ActorSystemError, AskTimeout, OuroactorsError, SpecError, StartInterrupted
from ..core.serving import QuietHTTPServer
from ..core.trusted_files import UntrustedFile
from ..runtime.execution.metrics import render as runtime_metrics
from ..supervision.specs import ChildSpec
from ..system.config import load_tree
from ..system.handle import ActorSystem
from ..system.marker import DataDirInUse
from ..system.metrics import render
from . import main
from .common import console, err_console, traceback_hint
from .render import event_line, tree_table
from .stop_request import StopRequest

EXIT_CLEAN, EXIT_STOP_FORCED, EXIT_BAD_INPUT, EXIT_START_FAILED, EXIT_TREE_ENDED, EXIT_ADMIN_DIED = 0, 1, 2, 3, 4, 6
STOP_TIMEOUT_S = 30.0  # the orderly stop of a foreground run (Ctrl-C, SIGTERM, `ouroactors stop`), all trees
BOOT_STOP_TIMEOUT_S = 5.0  # the same after a failed or interrupted boot (what started is stopped in order)


@main.command()
@click.argument("tree_file", type=click.Path(dir_okay=False))
@click.option("--base", type=click.Choice(["multiproc", "simple"]), default=None, help="override [system] base")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="override [system] data_dir")
@click.option("--detach", is_flag=True, help="start, print how to reach it, and return; `ouroactors stop` ends it")
@click.option("--metrics-port", type=click.IntRange(1, 65535), default=None, help="serve /metrics on 127.0.0.1:PORT")
@click.option("--admin-port", type=click.IntRange(1, 65535), default=None,
              help="thespian admin port (default: a free one)")
@click.option("--leader", is_flag=True, help="lead a convention on --admin-port that other nodes can --join")
@click.option("--join", "join", metavar="HOST:PORT", default=None, help="join the convention led at HOST:PORT")
@click.option("--capability", "capabilities", multiple=True, metavar="KEY=VALUE",
              help="a capability of this node; children with requires = {KEY = VALUE} are placed here")
@click.option("--bind", "bind_host", default=None,
              help="address the admin listens on (default 127.0.0.1: loopback only); actors stay on loopback")
@click.option("--secret-file", type=click.Path(dir_okay=False), default=None,
              help="the convention's shared secret: a copy (mode 600) of the leader's <data dir>/secret; "
                   "needed with --join")
@click.option("--log-level", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
                                               case_sensitive=False), default=None,
              help="override [system] log_level: the lowest level of the actors' log lines in <data dir>/admin.out")
def run(tree_file: str, base: str | None, data_dir: str | None, detach: bool, metrics_port: int | None,
        admin_port: int | None, leader: bool, join: str | None, capabilities: tuple[str, ...],
        bind_host: str | None, secret_file: str | None, log_level: str | None) -> None:
    """Boot TREE_FILE and serve it until Ctrl-C, SIGTERM or `ouroactors stop`.

    Every frame between the system's processes (and the nodes of a convention) is authenticated
    with the secret in the data dir; frames are not encrypted, so run a convention across machines
    only on a network you trust, and keep the default loopback binding unless other machines must
    reach this one.
    """
    try:
        tree = load_tree(tree_file)
    except SpecError as exc:
        err_console.print(str(exc), style="red", markup=False, highlight=False)
        sys.exit(EXIT_BAD_INPUT)
    base = base or tree.system.base
    if detach and metrics_port:
        err_console.print("--metrics-port serves /metrics from the `run` process, which --detach ends at once: "
                          "run in the foreground to serve metrics, or read them with `ouroactors metrics`",
                          style="red", markup=False, highlight=False)
        sys.exit(EXIT_BAD_INPUT)
    if detach and base != "multiproc":
        err_console.print("--detach needs the multiproc base (the simple base lives in this process)")
        sys.exit(EXIT_BAD_INPUT)
    caps = dict(tree.system.capabilities)
    for item in capabilities:
        key, sep, value = item.partition("=")
        if not sep or not key:
            err_console.print(f"--capability {item!r}: expected KEY=VALUE", markup=False)
            sys.exit(EXIT_BAD_INPUT)
        caps[key] = value
    if leader and join:
        err_console.print("--leader and --join exclude each other: a node leads or joins", markup=False)
        sys.exit(EXIT_BAD_INPUT)
    server = None
    if metrics_port:  # bound before anything starts: a port someone holds is refused with nothing to undo
        try:
            server = _metrics_server(metrics_port)
        except OSError as exc:
            err_console.print(f"cannot serve /metrics on 127.0.0.1:{metrics_port}: {exc.strerror or exc} (choose "
                              "another --metrics-port)", style="red", markup=False, highlight=False)
            sys.exit(EXIT_BAD_INPUT)
    stop = StopRequest()  # kept until the process exits: a second Ctrl-C does not cut the orderly stop short
    # `kill -USR1 <pid>` prints where every thread of this run is, without stopping it: what a user
    # needs when a stop seems stuck (the system's own processes log their state to admin.out).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    try:
        # the in-process base carries every message pickled, as multiproc does: a message that could not cross
        # a process fails here too, and every receiver works on a copy (what runs here runs there)
        system = ActorSystem.start(base, data_dir or tree.system.data_dir, detached=detach, capabilities=caps,
                                   bind_host=bind_host or tree.system.bind_host, admin_port=admin_port,
                                   leader=leader, convention=join, secret_file=secret_file,
                                   log_level=log_level or tree.system.log_level, pickle_messages=base == "simple")
    except (DataDirInUse, ActorSystemError, UntrustedFile) as exc:
        err_console.print(str(exc), style="red", markup=False, highlight=False)
        if server is not None:
            server.server_close()
        sys.exit(EXIT_BAD_INPUT)
    if system.stale_marker is not None:
        console.print(f"cleaned a stale marker left by a killed system (pid {system.stale_marker.owner_pid})",
                      markup=False)
    booted_after = len(system.events.all())
    try:
        system.start_tree(tree.tree, interrupted=stop.is_set)  # Ctrl-C, SIGTERM, `stop`: a hung boot ends too
    except OuroactorsError as exc:
        said = "interrupted" if isinstance(exc, StartInterrupted) else "failed to start"
        err_console.print(f"{said}: {exc}", style="red", markup=False, highlight=False)
        started = {e.path for e in system.events.all()[booted_after:] if e.kind == "started"}
        if isinstance(exc, StartInterrupted | AskTimeout) and (hung := _still_starting(tree.tree, started,
                                                                                        tree.tree.id)):
            err_console.print(f"still starting (its on_start has not returned): {hung}", markup=False,
                              highlight=False)
        hint = traceback_hint(exc, str(system.data_dir), system.base)
        if hint:
            err_console.print(hint, markup=False, highlight=False)
        system.shutdown(timeout=BOOT_STOP_TIMEOUT_S)
        if system.forced:
            err_console.print(f"what had started did not stop within {BOOT_STOP_TIMEOUT_S:g}s: every process of "
                              "the system was killed", markup=False, highlight=False)
        if server is not None:
            server.server_close()
        sys.exit(EXIT_START_FAILED)
    if detach:
        console.print(f"started {tree.tree.id!r} detached (admin pid {system.admin_pid}, data dir {system.data_dir}); "
                      f"stop it with: ouroactors stop --data-dir {shlex.quote(str(system.data_dir))}", markup=False)
        return
    if server is not None:
        _start_serving(server, system)
    watch = AdminWatch(system)
    code = EXIT_CLEAN
    try:
        code = _serve(system, tree.tree.id, stop, watch)
    finally:
        if server is not None:
            server.shutdown()
            server.server_close()
        system.shutdown(timeout=STOP_TIMEOUT_S)
        watch.close()
        if code == EXIT_ADMIN_DIED:
            err_console.print(watch.reason(), style="red", markup=False, highlight=False)
        elif system.forced:  # ended, but not in order
            err_console.print(f"the orderly stop did not finish within {STOP_TIMEOUT_S:g}s (still stopping: tree "
                              f"{', '.join(system.forced)}): every process of the system was killed",
                              style="red", markup=False, highlight=False)
            code = EXIT_STOP_FORCED
        else:
            console.print({EXIT_CLEAN: "stopped cleanly", EXIT_TREE_ENDED: "the tree ended on its own"}[code],
                          markup=False)
    sys.exit(code)


def _still_starting(spec: ChildSpec, started: set[str], path: str) -> str | None:
    """The child whose ``on_start`` a boot that timed out or was interrupted is still waiting for.

    A supervisor starts its children one at a time in their order and reports itself started after the last, so
    the first child of ``spec`` without a ``started`` event is it (or, a supervisor, the first of its own). Asking
    the tree cannot tell: its root has not reported yet, and answers nothing about its children.
    """
    for child in spec.children or ():
        here = f"{path}/{child.id}"
        if here not in started:
            return _still_starting(child, started, here) or here if child.is_supervisor else here
    return None


class AdminWatch:
    """Notices the death of a multiproc system's admin (a pidfd: readable once it has exited).

    The admin is not our child (thespian double-forks it), so how it died is not ours to learn;
    that it died is enough: every actor went with it, and serving on would be a lie.
    """

    def __init__(self, system: ActorSystem) -> None:
        self.pid = system.admin_pid if system.base == "multiproc" else None
        self._fd: int | None = None
        self._gone = False
        if self.pid is not None:
            try:
                self._fd = os.pidfd_open(self.pid)
            except OSError:
                self._gone = True
            if not system.admin_alive():  # the pid may have been reused before pidfd_open
                self._gone = True

    def gone(self) -> bool:
        if self._gone or self._fd is None:
            return self._gone
        readable, _, _ = select.select([self._fd], [], [], 0)
        self._gone = bool(readable)
        return self._gone

    def reason(self) -> str:
        return (f"the system's admin process (pid {self.pid}) died while serving (killed or crashed); "
                "every actor of the system went with it, so this run ends with an error")

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _serve(system: ActorSystem, root: str, stop: StopRequest, watch: AdminWatch) -> int:
    """Print events (plain) or a live table (terminal) until asked to stop, the tree ends or the
    admin dies."""
    seen = len(system.events.all())
    console.print(tree_table(system.walk(root), f"tree {root}"))
    logs = f"; logs in {os.path.join(system.data_dir, 'admin.out')}" if system.base == "multiproc" else ""
    console.print(f"serving {root!r} on {system.base} (data dir {system.data_dir}{logs}); Ctrl-C to stop",
                  markup=False)
    recent: list[str] = []
    live = Live(console=console, auto_refresh=False) if console.is_terminal else None
    if live is not None:
        live.start()
    try:
        while not stop.is_set():
            if watch.gone():
                return EXIT_ADMIN_DIED
            fresh = system.events.all()[seen:]
            seen += len(fresh)
            ended = any(e.kind == "tree_ended" and e.path == root for e in fresh)
            if live is None:
                for event in fresh:
                    console.print(event_line(event), markup=False, highlight=False, soft_wrap=True)
            elif fresh or not recent:
                recent = (recent + [event_line(e) for e in fresh])[-12:]
                rows = [] if ended else system.walk(root)
                live.update(Group(tree_table(rows, f"tree {root}"), Text("\n".join(recent))), refresh=True)
            if ended:
                return EXIT_TREE_ENDED
            stop.wait(0.1 if system.base == "multiproc" else 0)
            if system.base == "simple":
                system._idle(0.1)  # the in-process base only runs while called
    finally:
        if live is not None:
            live.stop()
    return EXIT_CLEAN


class _MetricsServer(QuietHTTPServer):
    system: ActorSystem  # set once the tree runs, before the server serves


def _metrics_server(port: int) -> _MetricsServer:
    """``/metrics`` on 127.0.0.1:``port``, bound now (OSError if it cannot be) and served once its ``system`` is
    set and ``serve_forever`` runs."""
    class Handler(BaseHTTPRequestHandler):
        server: _MetricsServer

        def do_GET(self) -> None:
            if self.path != "/metrics":
                self.send_error(404)
                return
            system = self.server.system
            dropped = system.dropped_frames() if system.base == "multiproc" else None
            body = render(system.events.all(), _safe_walk(system), system.context.node_epoch, dropped,
                          sections=(runtime_metrics,)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    return _MetricsServer(("127.0.0.1", port), Handler)


def _start_serving(server: _MetricsServer, system: ActorSystem) -> None:
    server.system = system
    threading.Thread(target=server.serve_forever, daemon=True).start()


def _serve_metrics(system: ActorSystem, port: int) -> _MetricsServer:
    """``/metrics`` of ``system`` served on 127.0.0.1:``port`` from now on (``shutdown()`` it)."""
    server = _metrics_server(port)
    _start_serving(server, system)
    return server


def _safe_walk(system: ActorSystem) -> list:
    try:
        return system.walk()
    except OuroactorsError:
        return []
