"""Which base URLs may use plain http: loopback hosts only."""

from __future__ import annotations


def test_loopback_check_agrees_with_ipaddress():
    """The start-up path tells loopback hosts apart without importing ipaddress, with the same answers."""
    import ipaddress

    from overbrainer.config.values import _is_loopback

    def reference(host: str) -> bool:
        try:
            return host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False

    hosts = ["127.0.0.1", "127.1.2.3", "127.255.255.255", "10.0.0.1", "0.0.0.0", "256.0.0.1", "127.01.0.1",
             "0127.0.0.1", "1.2.3", "::1", "::2", "localhost", "example.com", "127.0.0.1.nip.io"]
    assert [_is_loopback(h) for h in hosts] == [reference(h) for h in hosts]
