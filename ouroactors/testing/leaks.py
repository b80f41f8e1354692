"""Checks that a shut-down system left no process and no listening port behind."""

from __future__ import annotations

import socket
import time

from ..system.handle import ActorSystem, _group_alive


def port_listening(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.settimeout(0.2)
        return probe.connect_ex((host, port)) == 0


def assert_nothing_left(system: ActorSystem, timeout: float = 5.0) -> None:
    """Fail unless every process of ``system`` is gone and its admin port is closed."""
    deadline = time.monotonic() + timeout
    while True:
        alive = system.pgid is not None and _group_alive(system.pgid)
        listening = system.admin_port is not None and port_listening(system.admin_port)
        if not alive and not listening:
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"system left behind: process group {system.pgid} alive={alive}, "
                f"admin port {system.admin_port} listening={listening}"
            )
        time.sleep(0.01)  # bounded poll for the kernel to reap
