"""``run --metrics-port``'s server and a client that goes away mid-request (a scraper killed, a port scan)."""

from __future__ import annotations

import socket
import struct
import threading

import httpx

from ouroactors.cli.run import _metrics_server


def test_a_client_that_resets_its_connection_costs_the_metrics_server_no_traceback(capfd):
    """Before, socketserver printed its whole traceback on the foreground ``run``'s terminal for every reset
    connection; now it is one debug line in the log (``core.serving.QuietDisconnects``) and the server serves on."""
    server = _metrics_server(0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.server_address[1]
    try:
        for _ in range(3):
            rude = socket.create_connection(("127.0.0.1", port), timeout=5)
            rude.send(b"GET /metr")  # part of a request line, then a reset (SO_LINGER 0: RST, not FIN)
            rude.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            rude.close()
        assert httpx.get(f"http://127.0.0.1:{port}/nothing-here", timeout=10).status_code == 404  # still serving
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
    assert "Traceback" not in capfd.readouterr().err
