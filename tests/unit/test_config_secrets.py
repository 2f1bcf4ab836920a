"""Secrets: literal or vault: references, resolved lazily against a fake Vault KV v2 server."""

from __future__ import annotations

import time
import tomllib

import pytest

from overbrainer.config.load import parse_config
from overbrainer.config.secrets import Secret, parse_reference
from overbrainer.errors import OverbrainerError
from overbrainer.support import redact
from tests.unit.test_config_load import BASE

VALUE = "sk-vault-MARKER-7f3a"


@pytest.mark.parametrize("text, expected", [
    ("vault:secret/overbrainer/openrouter#api_key", ("secret", "overbrainer/openrouter", "api_key")),
    ("vault:kv/a#f#g", ("kv", "a#f", "g")),
    ("vault:secret#f", None),
    ("vault:/path#f", None),
    ("vault:secret/#f", None),
    ("vault:secret/path#", None),
    ("vault:secret/path", None),
    ("sk-literal", None),
])
def test_parse_reference(text, expected):
    assert parse_reference(text) == expected


def test_literal_secret_is_registered_and_never_shown():
    s = Secret("sk-literal-MARKER-1")
    assert not s.is_vault and s.resolve() == "sk-literal-MARKER-1"
    assert "MARKER" not in repr(s) and "MARKER" not in str(s) and "MARKER" not in f"{s}"
    assert redact.redact("key=sk-literal-MARKER-1") == "key=***"


def test_vault_secret_resolves_once_and_is_registered(vault):
    vault.put("secret", "overbrainer/openrouter", {"api_key": VALUE, "other": "x"})
    s = Secret("vault:secret/overbrainer/openrouter#api_key", vault.env())
    assert s.is_vault and s.location == "vault:secret/overbrainer/openrouter#api_key"
    assert s.resolve() == VALUE and s.resolve() == VALUE
    assert len(vault.requests) == 1
    assert vault.requests[0]["path"] == "/v1/secret/data/overbrainer/openrouter"
    assert vault.requests[0]["token"] == vault.token
    assert redact.redact(f"Bearer {VALUE}") == "Bearer ***"
    assert redact.redact(vault.token) == "***"


def test_token_from_the_vault_token_file(vault, tmp_path):
    vault.put("kv", "p", {"f": VALUE})
    (tmp_path / ".vault-token").write_text(vault.token + "\n")
    s = Secret("vault:kv/p#f", {"VAULT_ADDR": vault.url + "/", "HOME": str(tmp_path)})
    assert s.resolve() == VALUE


def test_missing_vault_settings(tmp_path):
    with pytest.raises(OverbrainerError, match="a vault: reference was found but VAULT_ADDR is not set"):
        Secret("vault:kv/p#f", {"HOME": str(tmp_path)}).resolve()
    with pytest.raises(OverbrainerError, match="VAULT_ADDR is set but no token was found in VAULT_TOKEN or ~/.vault-token"):
        Secret("vault:kv/p#f", {"VAULT_ADDR": "http://127.0.0.1:9", "VAULT_TOKEN": "  ", "HOME": str(tmp_path)}).resolve()


@pytest.mark.parametrize("setup, message", [
    (lambda v: None, "vault:kv/p#f was not found in vault (HTTP 404)"),
    (lambda v: (v.put("kv", "p", {"g": "x"})), "field missing or not a string at vault:kv/p#f"),
    (lambda v: (v.put("kv", "p", {"f": 12})), "field missing or not a string at vault:kv/p#f"),
    (lambda v: v.answer_next(b"<html>" + VALUE.encode()), "unparseable answer from vault for vault:kv/p#f"),
    (lambda v: v.answer_next(b'{"data": []}'), "unparseable answer from vault for vault:kv/p#f"),
    (lambda v: v.fail_next(500, 3, VALUE.encode()), "vault answered HTTP 500 for vault:kv/p#f"),
    (lambda v: v.fail_next(418, 1, VALUE.encode()), "vault answered HTTP 418 for vault:kv/p#f"),
])
def test_vault_failures_never_quote_the_answer(vault, setup, message):
    setup(vault)
    with pytest.raises(OverbrainerError) as e:
        Secret("vault:kv/p#f", vault.env()).resolve()
    assert str(e.value) == message
    assert VALUE not in str(e.value) and vault.token not in str(e.value)


def test_wrong_token_is_refused(vault):
    vault.put("kv", "p", {"f": VALUE})
    with pytest.raises(OverbrainerError, match=r"vault refused the token for vault:kv/p#f \(HTTP 403\)"):
        Secret("vault:kv/p#f", {"VAULT_ADDR": vault.url, "VAULT_TOKEN": "wrong-token"}).resolve()


def test_a_transient_error_is_retried(vault):
    vault.put("kv", "p", {"f": VALUE})
    vault.fail_next(503, 1)
    assert Secret("vault:kv/p#f", vault.env()).resolve() == VALUE
    assert len(vault.requests) == 2


def test_a_rate_limited_read_waits_as_vault_asks(vault, caplog):
    vault.put("kv", "p", {"f": VALUE})
    vault.fail_next(429, 1, b'{"errors":["request path kv/data/p: rate limit quota exceeded"]}',
                    headers={"Retry-After": "0.3"})
    start = time.monotonic()
    assert Secret("vault:kv/p#f", vault.env()).resolve() == VALUE
    assert time.monotonic() - start >= 0.3 and len(vault.requests) == 2
    assert "vault answered HTTP 429 for vault:kv/p#f; retrying in 0.3s" in caplog.text


def test_unreachable_vault():
    import socket

    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(OverbrainerError, match=f"cannot reach vault at http://127.0.0.1:{port}"):
        Secret("vault:kv/p#f", {"VAULT_ADDR": f"http://127.0.0.1:{port}", "VAULT_TOKEN": "t"}).resolve()


def test_loading_never_touches_vault_and_literals_work_without_it(vault):
    env = {**vault.env(), "OVERBRAINER_PROVIDERS__LOCAL__API_KEY": "vault:kv/p#f",
           "OVERBRAINER_HF_TOKEN": "hf-literal-token"}
    c = parse_config(tomllib.loads(BASE), env)
    assert vault.requests == []
    assert c.hf_token.resolve() == "hf-literal-token"
    c = parse_config(tomllib.loads(BASE), {"OVERBRAINER_HF_TOKEN": "hf-literal-token",
                                           "OVERBRAINER_PROVIDERS__LOCAL__API_KEY": "vault:kv/p#f"})
    assert c.hf_token.resolve() == "hf-literal-token"  # no VAULT_ADDR at all
