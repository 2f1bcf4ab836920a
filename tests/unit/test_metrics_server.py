"""The `/metrics` endpoint on a real socket: paths, methods, formats, limits, bind failures."""

from __future__ import annotations

import http.client
import logging
import socket
import time

import pytest

from overbrainer.config.model import Metrics
from overbrainer.metrics.exporter import Exporter, serve
from overbrainer.metrics.server import MetricsServer

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def request(server, method="GET", path="/metrics", headers=None):
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type"), r.read()
    finally:
        conn.close()


@pytest.fixture
def exporter(tmp_path):
    exp = Exporter(tmp_path, "demo", Metrics(listen="127.0.0.1:0", host="127.0.0.1", port=0)).start()
    yield exp
    exp.stop()


def test_metrics_in_the_format_asked_for_and_404_elsewhere(exporter):
    server = exporter.server
    assert server.url == f"http://127.0.0.1:{server.server_address[1]}/metrics"
    status, ctype, body = request(server)
    assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
    assert b'overbrainer_stage_running{project="demo",stage="answers"} 0.0' in body
    status, ctype, body = request(server, headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert status == 200 and ctype.startswith(OPENMETRICS) and body.endswith(b"# EOF\n")
    assert request(server, path="/metrics?x=1")[0] == 200
    for method, path in [("GET", "/"), ("GET", "/metrics/"), ("GET", "/favicon.ico"), ("POST", "/metrics"),
                         ("PUT", "/metrics"), ("DELETE", "/metrics")]:
        status, ctype, body = request(server, method, path)
        assert (status, body) == (404, b"not found\n"), (method, path)
    assert request(server, "HEAD", "/metrics")[:2] == (404, "text/plain; charset=utf-8")


def test_a_rendering_failure_answers_500(tmp_path):
    def broken(accept):
        raise RuntimeError("bug")

    server = MetricsServer("127.0.0.1", 0, broken).start()
    try:
        assert request(server)[0] == 500
        assert request(server, path="/x")[0] == 404
    finally:
        server.close()


def test_ipv6_loopback(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="overbrainer.metrics"):
        server = serve("::1", 0, lambda accept: (b"ok\n", "text/plain"))
    try:
        port = server.server_address[1]
        assert server.url == f"http://[::1]:{port}/metrics"
        assert f"metrics at http://[::1]:{port}/metrics" in caplog.text and "authentication" not in caplog.text
        assert request(server)[2] == b"ok\n"
    finally:
        server.close()


def test_a_non_loopback_address_warns_and_a_taken_port_only_warns(caplog):
    with caplog.at_level(logging.INFO, logger="overbrainer.metrics"):
        server = serve("0.0.0.0", 0, lambda accept: (b"ok\n", "text/plain"))
    try:
        port = server.server_address[1]
        assert f"metrics on http://0.0.0.0:{port}/metrics have no authentication" in caplog.text
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="overbrainer.metrics"):
            assert serve("0.0.0.0", port, lambda accept: (b"", "text/plain")) is None
        warning = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warning) == 1 and warning[0].getMessage().startswith(
            f"metrics: cannot listen on 0.0.0.0:{port}: Address already in use")
    finally:
        server.close()


def test_connections_over_the_limit_are_closed_at_once():
    server = MetricsServer("127.0.0.1", 0, lambda accept: (b"ok\n", "text/plain"), limit=2).start()
    held = [socket.create_connection(server.server_address[:2], timeout=5) for _ in range(2)]
    try:
        extra = socket.create_connection(server.server_address[:2], timeout=5)
        with extra:
            assert extra.recv(100) == b""  # closed by the server without a word
        for s in held:
            s.close()
        # The slots are free again once those connections ended.
        deadline = time.monotonic() + 10
        while True:
            try:
                assert request(server)[0] == 200
                break
            except (ConnectionError, http.client.RemoteDisconnected):
                assert time.monotonic() < deadline, "the slots were never released"
                time.sleep(0.05)
    finally:
        for s in held:
            s.close()
        server.close()
