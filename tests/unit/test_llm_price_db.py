"""The genai-prices database as the tool reads it (llm/price_db.py): which of its providers a
role's is, a model's prices and batch prices as the database gives them (checked against the
database's own calc_price), nothing for a self-hosted server."""

from __future__ import annotations

import pytest
from genai_prices import Usage as DbUsage
from genai_prices import __version__, calc_price

from overbrainer.llm import price_db
from overbrainer.support.usage import Usage


@pytest.mark.parametrize("protocol, dialect, url, found", [
    ("anthropic", None, "http://127.0.0.1:1/v1", {"provider_id": "anthropic"}),
    ("openai", "openai", "http://127.0.0.1:1/v1", {"provider_id": "openai"}),
    ("openai", "openrouter", "https://openrouter.ai/api/v1", {"provider_id": "openrouter"}),
    ("openai", "generic", "https://api.groq.com/openai/v1", {"provider_api_url": "https://api.groq.com/openai/v1"}),
    ("openai", "generic", "http://api.groq.com/openai/v1", None),
    ("openai", "generic", "https://127.0.0.1:8443/v1", None),
    ("openai", "generic", "https://localhost/v1", None),
    ("openai", "generic", "https://gpu-box/v1", None),
    ("openai", "llamacpp", "https://llama.example.com/v1", None),
    ("openai", "vllm", "https://vllm.example.com/v1", None),
    ("openai", "ollama", "https://ollama.example.com/v1", None),
])
def test_which_provider_of_the_database(protocol, dialect, url, found):
    assert price_db.where(protocol, dialect, url) == found


@pytest.mark.parametrize("model, protocol, dialect, provider_id", [
    ("gpt-4o-mini", "openai", "openai", "openai"),
    ("claude-haiku-4-5", "anthropic", None, "anthropic"),
    ("claude-sonnet-4-5", "anthropic", None, "anthropic"),
])
def test_a_model_s_prices_agree_with_the_database(model, protocol, dialect, provider_id):
    price = price_db.lookup(model, protocol, dialect, None)
    assert price is not None and price.source == f"genai-prices {__version__}" == price_db.source()
    for tokens in ((1000, 500), (123_456, 7_890)):
        for batch in (False, True):
            expected = calc_price(DbUsage(input_tokens=tokens[0], output_tokens=tokens[1]), model, provider_id=provider_id,
                                  price_context={"processing": "batch"} if batch else None).total_price
            ours = (price.batched() if batch else price).cost(Usage(*tokens))
            assert ours == pytest.approx(float(expected)), (tokens, batch)
    assert price.batched().input_per_million < price.input_per_million


def test_nothing_for_an_unknown_model_or_a_self_hosted_server():
    assert price_db.lookup("no-such-model-anywhere", "openai", "openai", None) is None
    assert price_db.lookup("gpt-4o-mini", "openai", "llamacpp", "http://127.0.0.1:8080/v1") is None
    assert price_db.lookup("gpt-4o-mini", "openai", "generic", "http://127.0.0.1:9/v1") is None


def test_config_check_on_a_self_hosted_server_loads_no_database_nor_package_metadata(tmp_path):
    """`config check` says where a role's price comes from with this module; for a provider the
    database cannot know, neither the database (pydantic) nor importlib.metadata (which reading
    the package's version from its metadata imported: 70M instructions of start-up) is loaded."""
    import subprocess
    import sys

    from tests.fixtures.cli import clean_env

    probe = ("import sys\nfrom types import SimpleNamespace as NS\nfrom overbrainer.llm import price_db\n"
             "p = NS(name='llm', protocol='openai', dialect='llamacpp', base_url='http://127.0.0.1:8080/v1', price=None)\n"
             "r = NS(model='m', price=None)\nprint(price_db.describe(p, r, 'roles.parent'))\n"
             "print(sorted(m for m in ('genai_prices', 'pydantic', 'importlib.metadata') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", probe], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    described, loaded = r.stdout.splitlines()
    assert described.startswith("unknown: a self-hosted server lists none") and loaded == "[]"
    assert price_db.version() == __version__  # where the database is used, its own version
