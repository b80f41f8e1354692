"""issue 11 §2: a sandboxed command cannot reach the host — its loopback, its files, its UNIX sockets.

Real bwrap, real processes, real sockets on the host's 127.0.0.1. Each attack was run against the sandbox that
shared the host's network namespace when network was granted (``--share-net``), bound ``/`` read-only, and
accepted any directory but ``/`` as the workspace: there, the connections succeeded, ``/etc/shadow`` and a
0600 secret in the data dir were read, a host UNIX socket answered, and ``/etc`` was accepted as workspace.
"""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ouroactors.core.serving import QuietHTTPServer
from ouroactors.runtime.sandbox import (
    NetworkPolicy,
    Probe,
    SandboxError,
    SandboxMode,
    WorkspaceRefused,
    probe_cached,
    run,
)

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed")

CONNECT = ("import socket\ntry:\n    socket.create_connection(({host!r}, {port}), 3)\n    print('CONNECTED')\n"
           "except OSError as exc:\n    print('refused:', type(exc).__name__, exc)\n")
FETCH = ("import urllib.request, urllib.error\ntry:\n    print(urllib.request.urlopen({url!r}, timeout=10).read()"
         ".decode())\nexcept urllib.error.HTTPError as exc:\n    print('HTTP', exc.code, exc.read().decode())\n")


@pytest.fixture(scope="module")
def found() -> Probe:
    p = probe_cached()
    assert p.available, f"bwrap is installed but the probe failed: {p.failure_kind}: {p.detail}"
    return p


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def host_listener() -> Iterator[tuple[socket.socket, int]]:
    """A TCP listener on the host's 127.0.0.1: what an actor port looks like to a sandboxed attacker."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.setblocking(False)
    try:
        yield sock, sock.getsockname()[1]
    finally:
        sock.close()


class _Hello(http.server.BaseHTTPRequestHandler):
    seen: list[str] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        body = f"hello from the host {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web() -> Iterator[tuple[int, list[str]]]:
    """A real HTTP server on the host's 127.0.0.1; yields its port and the paths it served."""
    seen: list[str] = []
    handler = type("Hello", (_Hello,), {"seen": seen})
    server = QuietHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _accepted(sock: socket.socket) -> bool:
    try:
        conn, _ = sock.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def _host_ips() -> list[str]:
    found = set()
    with contextlib.suppress(OSError):
        for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET):
            found.add(str(info[4][0]))
    return sorted(ip for ip in found if not ip.startswith("127."))


# --- network granted: the proxy is the only way out --------------------------------------------------------

def test_granted_network_cannot_connect_to_the_hosts_loopback(ws: Path, found: Probe,
                                                              host_listener: tuple[socket.socket, int]) -> None:
    sock, port = host_listener
    script = CONNECT.format(host="127.0.0.1", port=port)
    for ip in _host_ips():  # the host's other addresses are not a way round
        script += CONNECT.format(host=ip, port=port)
    result = run(["python3", "-c", script], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found,
                 allow_network=True, timeout=60)
    assert b"CONNECTED" not in result.stdout and b"refused:" in result.stdout, result
    assert not _accepted(sock)
    assert result.boundary.network and result.boundary.network_policy == "proxy(*)"


@pytest.mark.parametrize("tool", ["curl", "wget"])
def test_granted_network_curl_and_wget_cannot_reach_the_host(ws: Path, found: Probe, tool: str,
                                                             host_listener: tuple[socket.socket, int]) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    sock, port = host_listener
    url = f"http://127.0.0.1:{port}/"
    if tool == "curl":  # directly, and through the proxy (which must refuse loopback)
        script = f"curl -fsS --max-time 5 --noproxy '*' {url}; echo rc=$?; curl -fsS --max-time 5 {url}; echo rc=$?"
    else:
        script = f"wget -q -T 5 -t 1 --no-proxy -O- {url}; echo rc=$?; wget -q -T 5 -t 1 -O- {url}; echo rc=$?"
    result = run(["sh", "-c", script], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found,
                 allow_network=True, timeout=60)
    assert b"rc=0" not in result.stdout, result
    assert not _accepted(sock)
    assert any("127.0.0.1 resolves to 127.0.0.1 (loopback)" in r for r in result.network_refusals), result


def test_proxy_fetches_from_an_allowed_private_destination(ws: Path, found: Probe,
                                                           web: tuple[int, list[str]]) -> None:
    port, seen = web
    policy = NetworkPolicy(domains=("127.0.0.1",), private=("127.0.0.1/32",))
    connect = (  # CONNECT through the bridge by hand: the tunnel HTTPS clients use
        "import os, socket\nproxy = os.environ['https_proxy'].rsplit(':', 1)\n"
        "s = socket.create_connection((proxy[0][7:], int(proxy[1])), 5)\n"
        f"s.sendall(b'CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\n\\r\\n')\nprint(s.recv(100).split(b'\\r\\n')[0])\n"
        "s.sendall(b'GET /tunnel HTTP/1.0\\r\\n\\r\\n')\ndata = b''\nwhile chunk := s.recv(4096):\n    data += chunk\n"
        "print(data.split(b'\\r\\n\\r\\n', 1)[1].decode())\n")
    script = FETCH.format(url=f"http://127.0.0.1:{port}/forward") + connect
    result = run(["python3", "-c", script], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found,
                 network=policy, timeout=60)
    assert result.returncode == 0, result
    lines = result.stdout.decode().splitlines()
    assert lines == ["hello from the host /forward", "b'HTTP/1.1 200 Connection established'",
                     "hello from the host /tunnel"], result
    assert seen == ["/forward", "/tunnel"] and result.network_refusals == ()
    assert result.boundary.network_policy == "proxy(127.0.0.1; private: 127.0.0.1/32)"
    if shutil.which("curl"):
        curl = run(["curl", "-sS", "--max-time", "10", f"http://127.0.0.1:{port}/curl"], mode=SandboxMode.BWRAP,
                   workspace=str(ws), probe=found, network=policy, timeout=60)
        assert curl.stdout == b"hello from the host /curl", curl


def test_proxy_refuses_a_domain_outside_the_grant_and_names_it(ws: Path, found: Probe,
                                                               web: tuple[int, list[str]]) -> None:
    port, seen = web
    policy = NetworkPolicy(domains=("*.example.org",), private=("127.0.0.1/32",))
    script = FETCH.format(url="http://not-granted.test/") + FETCH.format(url=f"http://127.0.0.1:{port}/x")
    result = run(["python3", "-c", script], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found,
                 network=policy, timeout=60)
    out = result.stdout.decode()
    assert "HTTP 403 ouroactors proxy refused: not-granted.test is not in the granted domains" in out, result
    assert "HTTP 403 ouroactors proxy refused: 127.0.0.1 is not in the granted domains" in out
    assert seen == [] and len(result.network_refusals) == 2
    assert result.network_refusals[0].startswith("not-granted.test is not in the granted domains")


def test_proxy_refuses_loopback_unless_a_private_rule_names_it(ws: Path, found: Probe,
                                                              web: tuple[int, list[str]]) -> None:
    port, seen = web
    script = FETCH.format(url=f"http://127.0.0.1:{port}/a") + FETCH.format(url=f"http://localhost:{port}/b")
    result = run(["python3", "-c", script], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found,
                 network=NetworkPolicy(domains=("*",)), timeout=60)
    out = result.stdout.decode()
    assert out.count("HTTP 403") == 2 and "(loopback); no private rule names it" in out, result
    assert seen == []


# --- no network: the view is an allow-list ----------------------------------------------------------------

def test_secrets_data_dir_homes_and_run_are_not_visible(ws: Path, tmp_path: Path, found: Probe) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    (data / "secret").write_text("TOKEN")
    (data / "secret").chmod(0o600)
    home_secret = Path.home() / f".ouro-secret-{uuid.uuid4().hex}"
    home_secret.write_text("HOME-TOKEN")
    try:
        script = (f"cat /etc/shadow /etc/gshadow {data}/secret {home_secret} 2>&1; ls -A /home /run /var /mnt 2>&1;"
                  " ls /etc/ssh /etc/sudoers /etc/ssl/private 2>&1; ls -A /run | wc -l")
        result = run(["sh", "-c", script], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found,
                     data_dir=str(data))
    finally:
        home_secret.unlink()
    out = result.stdout.decode()
    assert "TOKEN" not in out and "root:" not in out, out
    for path in ("/etc/shadow", "/etc/gshadow", f"{data}/secret", str(home_secret), "/home", "/var", "/mnt",
                 "/etc/ssh", "/etc/sudoers", "/etc/ssl/private"):
        assert f"{path}: No such file or directory" in out or f"'{path}': No such file or directory" in out, path
    assert out.splitlines()[-1] == "0"  # /run exists (empty) inside, the host's /run does not


def test_host_unix_sockets_are_unreachable(ws: Path, found: Probe) -> None:
    name = f"ouro-{uuid.uuid4().hex[:12]}"
    paths = [f"/run/{name}.sock", f"/tmp/{name}.sock"]
    servers = []
    try:
        for path in paths:
            srv = socket.socket(socket.AF_UNIX)
            srv.bind(path)
            srv.listen(4)
            srv.setblocking(False)
            servers.append(srv)
        abstract = socket.socket(socket.AF_UNIX)
        abstract.bind(f"\0{name}")
        abstract.listen(4)
        abstract.setblocking(False)
        servers.append(abstract)
        script = "import socket\n" + "".join(
            f"s = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({p!r})\n    print('CONNECTED', {p!r})\n"
            f"except OSError as exc:\n    print('refused', {p!r}, type(exc).__name__)\n"
            for p in [*paths, f"\0{name}"])
        for network in (False, True):
            result = run(["python3", "-c", script], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found,
                         allow_network=network)
            assert b"CONNECTED" not in result.stdout and result.stdout.count(b"refused") == 3, result
        assert not any(_accepted(s) for s in servers)
    finally:
        for srv in servers:
            srv.close()
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


# --- the workspace must be a leased project directory ------------------------------------------------------

@pytest.mark.parametrize("mode", [SandboxMode.BWRAP, SandboxMode.NONE])
@pytest.mark.parametrize("workspace", ["/", "/etc", "/proc", "/usr/bin", "/run", "/var/lib", "/home", "/tmp",
                                       "/root", "/dev", "/sys", "/boot"])
def test_system_directories_are_refused_as_workspace(workspace: str, mode: SandboxMode) -> None:
    if not os.path.isdir(workspace):
        pytest.skip(f"{workspace} does not exist here")
    marker = f"ouro-ran-{uuid.uuid4().hex}"
    with pytest.raises(WorkspaceRefused, match="refused") as info:
        run(["touch", f"/tmp/{marker}"], mode=mode, workspace=workspace)
    assert isinstance(info.value, SandboxError) and repr(os.path.realpath(workspace)) in str(info.value)
    assert not os.path.exists(f"/tmp/{marker}")


def test_the_data_dir_is_refused_as_workspace_in_any_overlap(tmp_path: Path) -> None:
    data = tmp_path / "proj" / "data"
    (data / "sub").mkdir(parents=True)
    for workspace in (data, data / "sub", tmp_path / "proj"):
        with pytest.raises(WorkspaceRefused, match="overlaps the data dir"):
            run(["touch", "ran"], mode=SandboxMode.BWRAP, workspace=str(workspace), data_dir=str(data))
        assert not (workspace / "ran").exists()
    with pytest.raises(SandboxError, match="data dir"):
        run(["true"], mode=SandboxMode.BWRAP, workspace=str(tmp_path), data_dir=str(data),
            extra_ro=(str(data),))


def test_workspace_must_lie_in_the_canonical_leased_root(tmp_path: Path, found: Probe) -> None:
    lease, other = tmp_path / "lease", tmp_path / "other"
    (lease / "pkg").mkdir(parents=True)
    other.mkdir()
    (tmp_path / "link").symlink_to(lease)
    with pytest.raises(WorkspaceRefused, match="not the leased root"):
        run(["touch", "ran"], mode=SandboxMode.BWRAP, workspace=str(other), leased_root=str(lease), probe=found)
    with pytest.raises(WorkspaceRefused, match="not canonical"):
        run(["touch", "ran"], mode=SandboxMode.BWRAP, workspace=str(lease), leased_root=str(tmp_path / "link"),
            probe=found)
    assert not (other / "ran").exists() and not (lease / "ran").exists()
    ok = run(["touch", "ran"], mode=SandboxMode.BWRAP, workspace=str(lease / "pkg"), leased_root=str(lease),
             probe=found)
    assert ok.returncode == 0 and (lease / "pkg" / "ran").exists()
    assert ok.boundary.leased_root == str(lease) and f"workspace leased: {lease}" in ok.boundary.notes


def test_a_data_dir_inside_the_view_is_refused(ws: Path, found: Probe) -> None:
    from ouroactors.runtime.sandbox_fs import toolchain

    prefix = toolchain()[0] if toolchain() else "/usr"
    with pytest.raises(SandboxError, match="inside the read-only view"):
        run(["true"], mode=SandboxMode.BWRAP, workspace=str(ws), probe=found, data_dir=f"{prefix}/lib")


def test_another_local_user_cannot_use_the_proxy(as_other_user) -> None:  # type: ignore[no-untyped-def]
    from ouroactors.runtime.netproxy import NetProxy

    with NetProxy(NetworkPolicy(("*",))) as proxy:
        code = ("import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n"
                f"    s.connect({proxy.path!r})\n    print('CONNECTED')\nexcept OSError as exc:\n"
                "    print('refused', type(exc).__name__)\n")
        done = as_other_user(code)
    assert done.stdout.strip() == "refused PermissionError", done
