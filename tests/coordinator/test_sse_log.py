"""The SSE server on a data dir whose log holds an event that does not decode (no actor system needed)."""

from __future__ import annotations

from .support import new_record

TOKEN = "t" * 43


def test_a_log_that_does_not_decode_is_said_over_http_never_streamed_as_if_whole(tmp_path):
    """No actor system: the server reads the data dir. An event that does not decode ends the stream with the
    reason (500 before any event), and the store quarantines it; nothing is skipped silently."""
    import threading

    import httpx

    from ouroactors.authorities.storage.env import StorageConfig, close_env, db, open_env
    from ouroactors.runtime.coordinator.keys import log_prefix
    from ouroactors.runtime.coordinator.sse_server import SessionEventServer
    from ouroactors.runtime.coordinator.store import SessionStore

    config = StorageConfig.under(tmp_path)
    store = SessionStore(open_env(config))
    store.create(new_record("s1"))
    with store.env.begin(write=True) as txn:
        txn.put(log_prefix("s1") + (1).to_bytes(8, "big"), b"\xc1garbage", db=db(store.env, b"session_events"))
    server = SessionEventServer(tmp_path, "127.0.0.1", 0, TOKEN)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        got = httpx.get(f"http://127.0.0.1:{server.server_port}/sessions/s1/events?access_token={TOKEN}", timeout=10)
        assert got.status_code == 500 and "cannot be read" in got.text and "session_events" in got.text, got.text
    finally:
        server.close()
        thread.join(10)
        close_env(config)


def test_a_client_that_resets_its_connection_costs_the_server_no_traceback(tmp_path, capfd):
    """A client gone before its request line (a closed tab, a killed curl, a port scan) reset the connection, and
    the server printed socketserver's whole traceback to stderr (seen in the suite's output). Now one line in the
    log at debug; the server goes on serving."""
    import socket
    import struct
    import threading

    import httpx

    from ouroactors.authorities.storage.env import StorageConfig, close_env, open_env
    from ouroactors.runtime.coordinator.sse_server import SessionEventServer
    from ouroactors.runtime.coordinator.store import SessionStore

    config = StorageConfig.under(tmp_path)
    SessionStore(open_env(config)).create(new_record("s1"))
    server = SessionEventServer(tmp_path, "127.0.0.1", 0, TOKEN)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for _ in range(3):
            rude = socket.create_connection(("127.0.0.1", server.server_port), timeout=5)
            rude.send(b"GET /sess")  # part of a request line, then a reset (SO_LINGER 0: RST, not FIN)
            rude.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            rude.close()
        got = httpx.get(f"http://127.0.0.1:{server.server_port}/sessions/nope/events?access_token={TOKEN}", timeout=10)
        assert got.status_code == 404, got.text  # still serving
    finally:
        server.close()
        thread.join(10)
        close_env(config)
    assert "Traceback" not in capfd.readouterr().err
