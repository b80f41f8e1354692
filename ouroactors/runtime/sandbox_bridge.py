"""The in-sandbox bridge: ``127.0.0.1:<port>`` in the sandbox's own loopback -> the runtime's proxy socket.

Most HTTP clients (curl, pip, git, urllib, httpx) can use an ``http://host:port`` proxy but not a UNIX-socket
one. So when network is granted, the sandboxed command is started *by this script*: it binds the port on
the sandbox's private loopback (bwrap brings ``lo`` up in the new network namespace; the host's loopback is
a different interface in a different namespace and stays unreachable), starts the command as its child with
``HTTP(S)_PROXY`` pointing at that port (set by bwrap), copies bytes between each accepted connection and
the UNIX socket, and exits with the command's status (re-raising the signal that killed it, if any).

It is run as ``python -I -S -c <this file's source> <socket> <port> -- <command...>``: standard library only,
no site, no ouroactors import (the package is not inside the sandbox). It makes no decisions; the proxy
does, outside the sandbox.
"""

import os
import signal
import socket
import subprocess
import sys
import threading


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            chunk = src.recv(65536)
            if not chunk:
                break
            dst.sendall(chunk)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _bridge(conn: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        conn.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, conn), daemon=True)
    back.start()
    _pump(conn, upstream)
    back.join()
    conn.close()
    upstream.close()


def _serve(server: socket.socket, path: str) -> None:
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        threading.Thread(target=_bridge, args=(conn, path), daemon=True).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write("ouroactors bridge: usage: <socket> <port> -- <command...>\n")
        return 2
    path, port, command = argv[0], int(argv[1]), argv[3:]
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", port))
    server.listen(64)
    threading.Thread(target=_serve, args=(server, path), daemon=True).start()
    try:
        child = subprocess.Popen(command, close_fds=True)
    except OSError as exc:
        sys.stderr.write(f"{command[0]}: {exc.strerror or exc}\n")
        return 127 if isinstance(exc, FileNotFoundError) else 126
    code = child.wait()
    if code < 0:  # die of the same signal, so the caller sees what the command saw
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main(sys.argv[1:]))  # no waiting on the daemon threads still relaying
