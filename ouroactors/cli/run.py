"""``ouroactors run TREE``: boot a tree, show it live, stop it in order on Ctrl-C or SIGTERM."""

from __future__ import annotations

import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import click
from rich.console import Group
from rich.live import Live
from rich.text import Text

from ..core.errors import ActorSystemError, OuroactorsError, SpecError
from ..system.config import load_tree
from ..system.handle import ActorSystem
from ..system.marker import DataDirInUse
from ..system.metrics import render
from . import main
from .common import console, err_console
from .render import event_line, tree_table

EXIT_CLEAN, EXIT_BAD_INPUT, EXIT_START_FAILED, EXIT_TREE_ENDED = 0, 2, 3, 4


@main.command()
@click.argument("tree_file", type=click.Path(dir_okay=False))
@click.option("--base", type=click.Choice(["multiproc", "simple"]), default=None, help="override [system] base")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None, help="override [system] data_dir")
@click.option("--detach", is_flag=True, help="start, print how to reach it, and return; `ouroactors stop` ends it")
@click.option("--metrics-port", type=int, default=None, help="serve /metrics on 127.0.0.1:PORT")
@click.option("--admin-port", type=int, default=None, help="thespian admin port (default: a free one)")
@click.option("--leader", is_flag=True, help="lead a convention on --admin-port that other nodes can --join")
@click.option("--join", "join", metavar="HOST:PORT", default=None, help="join the convention led at HOST:PORT")
@click.option("--capability", "capabilities", multiple=True, metavar="KEY=VALUE",
              help="a capability of this node; children with requires = {KEY = VALUE} are placed here")
@click.option("--bind", "bind_host", default=None, help="address to listen on (default 127.0.0.1: loopback only)")
def run(tree_file: str, base: str | None, data_dir: str | None, detach: bool, metrics_port: int | None,
        admin_port: int | None, leader: bool, join: str | None, capabilities: tuple[str, ...],
        bind_host: str | None) -> None:
    """Boot TREE_FILE and serve it until Ctrl-C, SIGTERM or `ouroactors stop`.

    Nodes of a convention exchange pickled messages: run them only on a trusted network, and keep
    the default loopback binding unless you need other machines to reach this one.
    """
    try:
        tree = load_tree(tree_file)
    except SpecError as exc:
        err_console.print(str(exc), style="red", markup=False, highlight=False)
        sys.exit(EXIT_BAD_INPUT)
    base = base or tree.system.base
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
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        system = ActorSystem.start(base, data_dir or tree.system.data_dir, detached=detach, capabilities=caps,
                                   bind_host=bind_host or tree.system.bind_host, admin_port=admin_port,
                                   leader=leader, convention=join)
    except (DataDirInUse, ActorSystemError) as exc:
        err_console.print(str(exc), style="red", markup=False, highlight=False)
        sys.exit(EXIT_BAD_INPUT)
    if system.stale_marker is not None:
        console.print(f"cleaned a stale marker left by a killed system (pid {system.stale_marker.owner_pid})",
                      markup=False)
    try:
        system.start_tree(tree.tree)
    except OuroactorsError as exc:
        err_console.print(f"failed to start: {exc}", style="red", markup=False, highlight=False)
        system.shutdown()
        sys.exit(EXIT_START_FAILED)
    if detach:
        console.print(f"started {tree.tree.id!r} detached (admin pid {system.admin_pid}, data dir {system.data_dir}); "
                      f"stop it with: ouroactors stop --data-dir {system.data_dir}", markup=False)
        return
    server = _serve_metrics(system, metrics_port) if metrics_port else None
    code = EXIT_CLEAN
    try:
        code = _serve(system, tree.tree.id, stop)
    finally:
        if server is not None:
            server.shutdown()
        system.shutdown()
        console.print({EXIT_CLEAN: "stopped cleanly", EXIT_TREE_ENDED: "the tree ended on its own"}[code],
                      markup=False)
    sys.exit(code)


def _serve(system: ActorSystem, root: str, stop: threading.Event) -> int:
    """Print events (plain) or a live table (terminal) until asked to stop or the tree ends."""
    seen = len(system.events.all())
    console.print(tree_table(system.walk(root), f"tree {root}"))
    console.print(f"serving {root!r} on {system.base} (data dir {system.data_dir}); Ctrl-C to stop", markup=False)
    recent: list[str] = []
    live = Live(console=console, auto_refresh=False) if console.is_terminal else None
    if live is not None:
        live.start()
    try:
        while not stop.is_set():
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


def _serve_metrics(system: ActorSystem, port: int) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/metrics":
                self.send_error(404)
                return
            body = render(system.events.all(), _safe_walk(system), system.context.node_epoch).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _safe_walk(system: ActorSystem) -> list:
    try:
        return system.walk()
    except OuroactorsError:
        return []
