"""support/urls.py and files.path_text read URLs, IP addresses and paths as urllib.parse,
ipaddress and pathlib do, without importing them (start-up time): each is compared with the
library on a table of inputs, then on generated ones."""

from __future__ import annotations

import ipaddress
import random
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from overbrainer.support import urls
from overbrainer.support.files import path_text
from tests.fixtures.cli import clean_env

URLS = [
    # the configuration's usual URLs
    "https://api.openai.com/v1", "http://127.0.0.1:11434/v1", "http://localhost:8000/v1/",
    "https://openrouter.ai/api/v1", "https://api.runpod.io/v2", "https://huggingface.co",
    "http://vllm.internal:8000/v1", "http://my-ollama:11434", "HTTPS://API.OpenAI.COM/V1",
    # userinfo, query, fragment
    "https://user:pw@host:8443/v1?key=abc", "https://user@host/p#frag", "https://a:b@c@host:1/x?y#z",
    "http://host/?", "http://host/#", "http://host?q", "http://host#f?q", "http://host/p?q#f#g",
    "https://@host/", "https://:@host:/", "https://user:pw@/path",
    # ports: empty, out of range, not a number, non-ASCII digits, signs, spaces
    "http://host:", "http://host:0", "http://host:65535", "http://host:65536", "http://host:99999999",
    "http://host:-1", "http://host:+80", "http://host:8o", "http://host: 80", "http://host:٨٠",
    "http://host:80:90", "http://host:080",
    # IPv4 and IPv6 hosts (brackets are left to urllib.parse)
    "http://10.0.0.1:8000/v1", "http://[::1]:8080/v1", "http://[::1]/", "http://[fe80::1%25eth0]:1/",
    "http://[FE80::1%tESt]:1/", "http://[127.0.0.1]/", "http://[v1.x]/", "http://[vz.x]/", "http://[::1/",
    "http://::1]/", "http://[::1]x:80/", "http://[not-ip]/", "http://u@[::1]:9/", "http://[::ffff:1.2.3.4]/",
    # schemes: case, odd characters, none, digits first, a path that looks like a port
    "HTTP://host", "git+ssh://host/repo", "a.b-c+d://host", "1http://host", "ht tp://host", "://host",
    "host:8080", "localhost:11434/v1", "/just/a/path", "relative/path", "", ":", "//host/p", "///p",
    "mailto:someone@example.com", "file:///etc/passwd", "file:/etc", "urn:isbn:123", "ftp://h/f;type=a",
    "é://host", "h\u00e9://host",
    # white space and control characters (stripped on the left, tabs and newlines removed anywhere)
    "  https://host/v1", "\x00\x1fhttps://host", "https://ho\tst/v\n1\r", "https://host/v1  ",
    "https://host /v1", "\thttp://host:80\n",
    # non-ASCII hosts (NFKC-checked by urllib.parse), percent escapes
    "https://bücher.example/", "https://ex\u2100ample.com/", "https://exa%41mple.com/",
    "https://\uff21.example/", "https://host/p\u00e9?q\u00e9#f\u00e9",
]


def _read(url: str, split=urls.split, unsplit=urls.unsplit):
    """Everything a caller reads of a URL: the parts, hostname, port, and the URL put back."""
    try:
        p = split(url)
    except ValueError:
        return "ValueError"
    host = p.hostname
    try:
        port = p.port
    except ValueError:
        port = "ValueError"
    return (tuple(p), host, port, unsplit(p) if p.netloc else None)  # without a netloc, see below


def _split_ref(url: str):
    return _read(url, urlsplit, urlunsplit)


def _split_ours(url: str):
    return _read(url)


@pytest.mark.parametrize("url", URLS)
def test_split_agrees_with_urllib(url):
    assert _split_ours(url) == _split_ref(url)


def test_split_agrees_with_urllib_on_generated_urls():
    pieces = ["http", "https", "HTTP", "x+y", "1a", ":", "//", "/", "?", "#", "@", "[", "]", "::1", "host",
              "HOST", "127.0.0.1", "80", "65536", "-", "%", "%41", " ", "\t", "\n", "é", "a:b", "user@",
              ".", "", "v1", "ab"]
    rng = random.Random(16)
    for _ in range(4000):
        url = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 9)))
        assert _split_ours(url) == _split_ref(url), url


@pytest.mark.parametrize("parts", [
    ("http", "host", "v1", "", ""), ("http", "h", "/p", "***", ""), ("", "h", "", "", ""), ("https", "u:p@h:1", "", "q", "f"),
    ("HTTP", "H", "p", "", ""),
])
def test_unsplit_agrees_with_urllib(parts):
    assert urls.unsplit(parts) == urlunsplit(parts)


@pytest.mark.parametrize("parts,url", [
    # Without a netloc, Python 3.13's urlunsplit (earlier versions differ here; show_url never
    # meets one: a configured URL has a host)
    (("http", "", "host/p", "", ""), "http:host/p"), (("http", "", "//p", "", ""), "http:////p"),
    (("http", "", "/p", "", ""), "http:///p"), (("https", "", "", "", ""), "https://"),
    (("mailto", "", "a@b", "", ""), "mailto:a@b"), (("", "", "", "q", "f"), "?q#f"), (("urn", "", "x:y", "", ""), "urn:x:y"),
    (("file", "", "/etc", "", ""), "file:///etc"), (("", "", "p", "", ""), "p"), (("", "", "//p", "", ""), "////p"),
])
def test_unsplit_without_a_netloc(parts, url):
    assert urls.unsplit(parts) == url
    if sys.version_info >= (3, 13):
        assert urlunsplit(parts) == url


ADDRESSES = [
    "127.0.0.1", "127.1.2.3", "127.255.255.255", "10.0.0.1", "192.168.1.1", "172.16.0.1", "0.0.0.0",
    "255.255.255.255", "256.0.0.1", "127.01.0.1", "0127.0.0.1", "127.0.0.01", "00.0.0.0", "1.2.3", "1.2.3.4.5",
    "1..2.3", ".1.2.3", "1.2.3.", "1.2.3.4 ", " 1.2.3.4", "+1.2.3.4", "1.2.3.-4", "1.2.3.1000", "2130706433",
    "١٢٧.0.0.1", "²²².0.0.1", "0x7f.0.0.1", "", "localhost", "example.com", "127.0.0.1.nip.io",
    "::1", "::2", "::", "0:0:0:0:0:0:0:1", "0000:0000:0000:0000:0000:0000:0000:0001", "::0001", "::ffff:127.0.0.1",
    "::ffff:7f00:1", "::127.0.0.1", "fe80::1", "fe80::1%eth0", "FE80::ABCD", "2001:db8::1", "2001:DB8:0:0:8:800:200C:417A",
    "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1::2::3", ":1", "1:", "::1%", "[::1]", "::g", "12345::1",
    "1:2:3:4:5:6:1.2.3.4", "::1.2.3", "fc00::1", "fd12:3456::1",
]


@pytest.mark.parametrize("text", ADDRESSES)
def test_ip_agrees_with_ipaddress(text):
    try:
        address = ipaddress.ip_address(text)
        expected = (address.version, str(address))
        loopback = address.is_loopback
    except ValueError:
        expected, loopback = None, False
    assert urls.ip(text) == expected
    assert urls.is_loopback_ip(text) is loopback


def test_ip_agrees_with_ipaddress_on_generated_addresses():
    pieces = ["0", "1", "00", "01", "127", "255", "256", "999", "ff", "FFFF", "10000", ".", ".", ":", "::", "٣", ""]
    rng = random.Random(16)
    for _ in range(4000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 9)))
        try:
            address = ipaddress.ip_address(text)
            expected, loopback = (address.version, str(address)), address.is_loopback
        except ValueError:
            expected, loopback = None, False
        assert (urls.ip(text), urls.is_loopback_ip(text)) == (expected, loopback), text


PATHS = [
    ("proj",), ("proj/",), ("./proj",), ("proj//sub/./x/",), (".",), ("",), ("/",), ("//",), ("///",),
    ("//srv/x",), ("///srv/x",), ("/srv/distil",), ("../up",), ("a/../b",), ("proj", ".env"), ("proj/", ".env"),
    (".", "overbrainer.toml"), ("", "a"), ("a", ""), ("a", "/b"), ("a", "//b", "c"), ("/", "a", ".", "b"),
    ("proj", ".overbrainer", "version"), ("~/x",), ("a b/c",), ("é/ü",), ("proj/.",), ("./.",),
]


@pytest.mark.parametrize("parts", PATHS)
def test_path_text_agrees_with_pathlib(parts):
    assert path_text(*parts) == str(Path(*parts))
    assert path_text(*map(Path, parts)) == str(Path(*parts))  # os.PathLike parts too


def test_path_text_refuses_bytes_as_pathlib_does():
    with pytest.raises(TypeError):
        Path(b"proj")
    with pytest.raises(TypeError):
        path_text(b"proj")


# An editable install's import hook may have loaded pathlib before: forgotten first, so that only
# an import by the command itself brings these modules back.
PROBE = """
import sys
for name in ("pathlib", "urllib.parse", "ipaddress"):
    sys.modules.pop(name, None)
from overbrainer.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit as e:
    sys.stderr.write(f"\\nEXIT {e.code}")
sys.stderr.write("\\nLOADED " + str(sorted(m for m in ("pathlib", "urllib.parse", "ipaddress") if m in sys.modules)))
"""


def test_config_check_imports_no_pathlib_urllib_or_ipaddress(tmp_path):
    """What `config check` runs reads its paths and URLs on its own (docs/contract.md, support/)."""
    env = clean_env({"OVERBRAINER_PROVIDERS__LLM__BASE_URL": "http://127.0.0.1:9/v1"}, home=tmp_path)
    init = subprocess.run([sys.executable, "-m", "overbrainer", "init", str(tmp_path / "p")], capture_output=True,
                          text=True, env=env, timeout=60)
    assert init.returncode == 0, init.stderr
    r = subprocess.run([sys.executable, "-c", PROBE, "-C", str(tmp_path / "p"), "config", "check"],
                       capture_output=True, text=True, env=env, timeout=60)
    assert "providers.llm.base_url = http://127.0.0.1:9/v1" in r.stdout
    assert r.stderr.strip().splitlines()[-2:] == ["EXIT 0", "LOADED []"]
