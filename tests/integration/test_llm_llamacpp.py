"""The llamacpp dialect against a real llama-server (SmolLM2-135M): every body the client builds for
the generator, the parent and the judge, with and without reasoning, is accepted and answered."""

from __future__ import annotations


import pytest

from overbrainer.config.model import Pipeline, Provider, Role
from overbrainer.llm.client import connect
from tests.fixtures.provider import llm_session
from tests.integration.test_llm_dialects import KINDS


@pytest.fixture
def server(llama_server, smollm2_gguf):
    url = llama_server(smollm2_gguf)
    yield url + "/v1"


def test_llama_server_takes_every_llamacpp_body(server):
    provider = Provider("local", "openai", server, dialect="llamacpp")
    pipeline = Pipeline(concurrency=1, max_retries=0, request_timeout_secs=120)
    for kind, (role_kw, request) in KINDS.items():
        role = Role("local", **{**dict(model="smollm2", reasoning=False, max_tokens=16, temperature=None, reasoning_effort=None,
                            thinking_budget=None, thinking=None), **role_kw})
        r = connect(provider, role, pipeline, llm=llm_session()).chat(request)
        assert 0 < r.usage.output_tokens <= 16 and r.content.strip(), kind
        if request.structured:  # the server holds the answer to the schema (cut short here)
            assert r.content.lstrip().startswith("{"), (kind, r.content)
