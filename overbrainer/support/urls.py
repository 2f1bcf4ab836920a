"""URL and IP-address reading for the configuration, without `urllib.parse` and `ipaddress`:
importing the two costs as many instructions as a sixteenth of `import click`, and `config check`
reads a URL in every configuration.

`split` and `unsplit` give what `urllib.parse.urlsplit` and `urlunsplit` give (`unsplit` of a URL
without a netloc as Python 3.13's does), `ip` what
`ipaddress.ip_address` accepts (tests/unit/test_support_urls.py compares them on a table of
inputs). The rare forms whose checks need those modules (a bracketed IPv6 host, a host beyond
ASCII, an IPv6 address) are handed to them, imported then.
"""

from __future__ import annotations

_C0_OR_SPACE = "".join(chr(i) for i in range(0x21))  # stripped from the left, as urlsplit does
_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-.")
# urllib.parse.uses_netloc: the schemes whose URLs `unsplit` writes with `//`.
_USES_NETLOC = frozenset({"", "ftp", "http", "gopher", "nntp", "telnet", "imap", "wais", "file", "mms",
                          "https", "shttp", "snews", "prospero", "rtsp", "rtsps", "rtspu", "rsync", "svn",
                          "svn+ssh", "sftp", "nfs", "git", "git+ssh", "ws", "wss"})


class Parts:
    """The five parts of a URL (urlsplit's SplitResult: scheme, netloc, path, query, fragment),
    with its `hostname` and `port`."""

    __slots__ = ("scheme", "netloc", "path", "query", "fragment")

    def __init__(self, scheme: str, netloc: str, path: str, query: str, fragment: str):
        self.scheme, self.netloc, self.path, self.query, self.fragment = scheme, netloc, path, query, fragment

    def __iter__(self):
        return iter((self.scheme, self.netloc, self.path, self.query, self.fragment))

    def _hostinfo(self) -> tuple[str, str | None]:
        hostinfo = self.netloc.rpartition("@")[2]
        _, bracket, bracketed = hostinfo.partition("[")
        if bracket:
            host, _, port = bracketed.partition("]")
            port = port.partition(":")[2]
        else:
            host, _, port = hostinfo.partition(":")
        return host, port or None

    @property
    def hostname(self) -> str | None:
        """The host, lower-cased (an IPv6 zone after `%` kept as written); None without one."""
        host = self._hostinfo()[0]
        if not host:
            return None
        host, percent, zone = host.partition("%")
        return host.lower() + percent + zone

    @property
    def port(self) -> int | None:
        """The port as a number; None without one; ValueError when it is not 0-65535."""
        port = self._hostinfo()[1]
        if port is None:
            return None
        if not (port.isdigit() and port.isascii()):
            raise ValueError(f"Port could not be cast to integer value as {port!r}")
        number = int(port)
        if not 0 <= number <= 65535:
            raise ValueError("Port out of range 0-65535")
        return number


def split(url: str) -> Parts:
    """urllib.parse.urlsplit(url): the parts, or the ValueError it raises."""
    text = url.lstrip(_C0_OR_SPACE).replace("\t", "").replace("\r", "").replace("\n", "")
    scheme = netloc = query = fragment = ""
    colon = text.find(":")
    if colon > 0 and text[0].isascii() and text[0].isalpha() and all(c in _SCHEME_CHARS for c in text[:colon]):
        scheme, text = text[:colon].lower(), text[colon + 1:]
    if text[:2] == "//":
        ends = [i for i in (text.find(c, 2) for c in "/?#") if i >= 0]
        end = min(ends) if ends else len(text)
        netloc, text = text[2:end], text[end:]
        if "[" in netloc or "]" in netloc or not netloc.isascii():
            # lazy: a bracketed host is checked with ipaddress, one beyond ASCII under NFKC
            from urllib.parse import urlsplit

            return Parts(*urlsplit(url))
    if "#" in text:
        text, fragment = text.split("#", 1)
    if "?" in text:
        text, query = text.split("?", 1)
    return Parts(scheme, netloc, text, query, fragment)


def unsplit(parts) -> str:
    """urllib.parse.urlunsplit(parts): the URL of five parts (scheme, netloc, path, query,
    fragment). Without a netloc, as Python 3.13's writes it (earlier ones add `//` after an
    `http:` whose path does not start with `/`, and do not double the `//` a path starts with)."""
    scheme, netloc, path, query, fragment = parts
    if netloc:
        if path and path[:1] != "/":
            path = "/" + path
        path = "//" + netloc + path
    elif path[:2] == "//" or (scheme in _USES_NETLOC and scheme and (not path or path[:1] == "/")):
        path = "//" + path
    if scheme:
        path = scheme + ":" + path
    if query:
        path = path + "?" + query
    if fragment:
        path = path + "#" + fragment
    return path


def _ipv4(text: str) -> bool:
    """Whether `text` is a dotted-quad IPv4 address as ipaddress accepts it (four decimal octets
    of 0-255, no leading zero)."""
    octets = text.split(".")
    return len(octets) == 4 and all(
        1 <= len(o) <= 3 and o.isascii() and o.isdigit() and (o == "0" or o[0] != "0") and int(o) <= 255
        for o in octets)


def ip(text: str) -> tuple[int, str] | None:
    """(version, the address as ipaddress writes it) when `text` is an IP address
    (`ipaddress.ip_address(text)`); None when it is not."""
    if _ipv4(text):
        return 4, text  # already written as ipaddress writes it
    if ":" not in text:
        return None  # neither IPv4 nor IPv6 (every IPv6 address has a colon)
    # lazy: IPv6 (compressed forms, embedded IPv4, zones) is ipaddress's to read
    import ipaddress

    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    return address.version, str(address)


def is_loopback_ip(text: str) -> bool:
    """Whether `text` is a loopback IP address (`ipaddress.ip_address(text).is_loopback`)."""
    if _ipv4(text):
        return text.startswith("127.")
    if ":" not in text:
        return False
    # lazy: IPv6 (compressed forms, embedded IPv4, zones) is ipaddress's to read
    import ipaddress

    try:
        return ipaddress.ip_address(text).is_loopback
    except ValueError:
        return False
