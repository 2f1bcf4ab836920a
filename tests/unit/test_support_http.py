"""The shared HTTP stack (overbrainer/support/http.py): Retry-After in both forms and its cap, the
backoff's jitter bounds, the capped reader and its deadline against a real local server, the
session's environment read once, failures worded without the URL (the retry loop:
test_support_retry.py)."""

from __future__ import annotations

import gzip
import io
import time
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler

import pytest

from overbrainer.support import http
from overbrainer.support.redact import MASK, register, words
from tests.fixtures.provider import closed_url, serving

NOW = 1_445_412_480.0  # Wed, 21 Oct 2015 07:28:00 GMT


# --- Retry-After ----------------------------------------------------------------------------

@pytest.mark.parametrize("value, seconds", [("120", 120.0), (" 7 ", 7.0), ("1.5", 1.5), ("0", 0.0)])
def test_retry_after_in_seconds(value, seconds):
    assert http.retry_after(value) == seconds


@pytest.mark.parametrize("value", [None, "", "  ", "-1", "nan", "inf", "-inf", "soon", "12 s", "Wed, 99 Foo"])
def test_an_unreadable_retry_after_is_none(value):
    assert http.retry_after(value, now=NOW) is None


@pytest.mark.parametrize("form", [
    "Wed, 21 Oct 2015 07:28:30 GMT",      # IMF-fixdate, the form servers send
    "Wednesday, 21-Oct-15 07:28:30 GMT",  # the obsolete RFC 850 form
    "Wed Oct 21 07:28:30 2015",           # the obsolete asctime form (UTC)
])
def test_retry_after_as_an_http_date(form):
    assert http.retry_after(form, now=NOW) == pytest.approx(30.0)


def test_an_http_date_past_means_at_once_and_now_defaults_to_the_clock():
    assert http.retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now=NOW) == 0.0
    in_a_minute = formatdate(time.time() + 60, usegmt=True)
    assert 55 <= http.retry_after(in_a_minute) <= 60


def test_retry_after_is_capped_unless_asked_not_to():
    assert http.retry_after("5000") == http.RETRY_AFTER_CAP == 600.0
    assert http.retry_after("5000", cap=30) == 30.0
    assert http.retry_after("5000", cap=None) == 5000.0
    assert http.retry_after("Thu, 22 Oct 2015 07:28:00 GMT", now=NOW) == 600.0  # a day away
    assert http.retry_after("Thu, 22 Oct 2015 07:28:00 GMT", cap=None, now=NOW) == 86400.0


# --- backoff --------------------------------------------------------------------------------

@pytest.mark.parametrize("attempt, top", [(1, 1.0), (2, 2.0), (3, 4.0), (6, 32.0), (7, 60.0), (12, 60.0)])
def test_backoff_stays_within_its_jitter_bounds(attempt, top):
    waits = [http.backoff(attempt) for _ in range(200)]
    assert all(0.5 * top <= w <= top for w in waits)
    assert len(set(waits)) > 100  # jittered: threads that failed together do not retry together


def test_backoff_base_and_cap_are_the_callers():
    waits = [http.backoff(n, base=0.2, cap=2.0) for n in (1, 2, 5, 9) for _ in range(50)]
    assert all(0.1 <= w <= 2.0 for w in waits) and max(waits) > 1.0


# --- one exchange against a real server -------------------------------------------------------

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    body = b"x" * 1000

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:
        body = self.body
        self.send_response(200)
        if self.path == "/gzip":
            body = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.flush()
        if self.path == "/stall":  # the headers, then nothing for 10 s
            time.sleep(10)
            return
        self.wfile.write(body)


@pytest.fixture
def server():
    with serving(_Handler) as url:
        yield url


def test_the_body_is_read_whole_within_its_cap(server):
    s = http.session(server)
    answer = http.exchange(s, "GET", server + "/plain", timeout=(5, 5), cap=1000)
    assert answer.status == 200 and answer.body == b"x" * 1000
    with pytest.raises(http.TooLarge) as e:
        http.exchange(s, "GET", server + "/plain", timeout=(5, 5), cap=999)
    assert e.value.cap == 999
    # The cap counts decoded bytes: a small gzip body does not slip a large answer through.
    assert http.exchange(s, "GET", server + "/gzip", timeout=(5, 5), cap=1000).body == b"x" * 1000
    with pytest.raises(http.TooLarge):
        http.exchange(s, "GET", server + "/gzip", timeout=(5, 5), cap=999)


def test_a_body_can_go_to_a_sink_as_it_arrives(server):
    """A 2xx body goes to the sink, not to memory (the cap still holds); what the sink's write
    raises (a full disk) is raised as it is, not taken for a cut connection."""
    s = http.session(server)
    sink = io.BytesIO()
    answer = http.exchange(s, "GET", server + "/gzip", timeout=(5, 5), cap=1000, sink=sink)
    assert answer.status == 200 and answer.body == b"" and sink.getvalue() == b"x" * 1000
    with pytest.raises(http.TooLarge):
        http.exchange(s, "GET", server + "/plain", timeout=(5, 5), cap=999, sink=io.BytesIO())

    class Full(io.BytesIO):
        def write(self, chunk):
            raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left") as e:
        http.exchange(s, "GET", server + "/plain", timeout=(5, 5), sink=Full())
    assert not isinstance(e.value, http.Unanswered)


def test_a_stalled_body_ends_at_the_deadline_not_at_the_read_timeout(server):
    # The socket waits up to the 8 s read timeout; the reader cuts that wait to the deadline.
    # (A body trickling byte by byte: tests/integration/test_llm_deadlines.py.)
    s = http.session(server)
    start = time.monotonic()
    with pytest.raises(http.Unanswered) as e:
        http.exchange(s, "GET", server + "/stall", timeout=(8, 8), deadline=start + 0.3)
    assert e.value.kind == http.TIMEOUT and str(e.value) == "timed out"
    assert time.monotonic() - start < 0.3 + http.DEADLINE_SLACK + 2


def test_a_failure_is_worded_by_its_kind_never_by_the_url():
    url = closed_url() + "/v1?key=sk-in-the-url-123"
    with pytest.raises(http.Unanswered) as e:
        http.exchange(http.session(url), "GET", url, timeout=(5, 5))
    assert e.value.kind == http.REFUSED and str(e.value) == "connection refused"
    assert "sk-in-the-url" not in str(e.value) and e.value.cause is not None
    assert http.display_url("https://user:pw@example.org/v1") == "https://example.org/v1"


# --- sessions ---------------------------------------------------------------------------------

def test_a_session_reads_the_proxy_once_and_never_netrc(monkeypatch, tmp_path):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    for name in ("NO_PROXY", "no_proxy"):  # (the lower-case one wins where both are set)
        monkeypatch.setenv(name, "internal.example")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "ca.pem"))
    s = http.session("https://api.example.org/v1", headers={"Authorization": "Bearer k"}, pool=64)
    assert s.proxies.get("https") == "http://proxy.invalid:3128" and not s.trust_env
    assert s.verify == str(tmp_path / "ca.pem")
    assert s.headers["User-Agent"] == http.USER_AGENT and s.headers["Authorization"] == "Bearer k"
    assert s.get_adapter("https://api.example.org")._pool_maxsize == 64
    assert http.grow_pool(s, 3) == http.POOL
    assert http.session("https://internal.example/v1").proxies == {}  # NO_PROXY
    monkeypatch.delenv("HTTPS_PROXY")
    assert s.proxies.get("https") == "http://proxy.invalid:3128"  # read when the session was made


# --- a server's words -------------------------------------------------------------------------

def test_a_servers_words_are_masked_stripped_on_one_line_and_capped():
    register("sk-words-secret-99")
    text = "bad key sk-words-secret-99\n\x1b[31mretry\x1b[0m   later " + "y" * 400
    out = words(text)
    assert out.startswith(f"bad key {MASK} retry later yyy") and len(out) == 300
    assert words(" \n\t ") == ""
