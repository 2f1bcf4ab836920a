"""`config check --probe` proves the setup works: a wrong key fails it (even where the model listing
needs no key, as on OpenRouter) and so does a model the provider does not list; Anthropic's
thinking budget does not get the probe refused; each training target is reached and runs axolotl,
and a Runpod target's key and GPU types are checked against the catalog. A refused key is said
before a model the listing lacks; such a model is a warning when a 1-token chat with it answers. Exit 1 on any failure,
one line each."""

from __future__ import annotations

import json

from tests.fixtures.provider import Fault
from tests.fixtures.runpod_server import Fault as RunpodFault
from tests.integration.test_runs_support import make_project

KEY_VAR = "OVERBRAINER_PROVIDERS__FAKE__API_KEY"


def test_a_wrong_key_fails_the_probe_even_where_the_listing_is_public(project, fake_provider, cli):
    project.write(dialect="openrouter", api_key="sk-or-wrong")
    fake_provider.dialect = "openrouter"
    fake_provider.api_key = "sk-or-right"
    fake_provider.models = {"qwen/qwen3-235b": (0.1, 0.2), "deepseek/deepseek-r1": (0.5, 2.0)}
    r = cli(["-C", project.dir, "config", "check", "--probe"], env=project.env)
    assert r.returncode == 77  # a refused key: a person must act
    assert (f"probe generator: fake ({project.url}) FAILED: provider fake: authentication failed; check its "
            f"API key ({KEY_VAR})") in r.stdout.splitlines()
    assert r.stderr.strip().splitlines()[-1] == "error: probe failed for generator, parent: see the lines above"
    assert "sk-or-wrong" not in r.stdout + r.stderr
    r = cli(["-C", project.dir, "config", "check", "--probe"], env={**project.env, KEY_VAR: "sk-or-right"})
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_model_the_listing_lacks_is_a_warning_when_it_answers_and_a_failure_when_it_does_not(
        project, fake_provider, cli):
    # A server that answers any name (llama.cpp's llama-server behind an unguessed URL) lists one.
    fake_provider.models = {"qwen/qwen3-235b": (0.1, 0.2)}
    r = cli(["--json", "-C", project.dir, "config", "check", "--probe"], env=project.env)
    assert r.returncode == 0, r.stdout + r.stderr
    probes = {p["role"]: p for p in json.loads(r.stdout)["probe"]}
    assert probes["generator"]["ok"] is True and probes["generator"]["warning"] is False
    assert probes["parent"] == {
        "role": "parent", "provider": "fake", "base_url": project.url, "ok": True, "warning": True,
        "detail": "model deepseek/deepseek-r1 is not in provider fake's model listing (1 models), but an "
                  "authenticated 1-token chat with deepseek/deepseek-r1 answered (a server that answers any name "
                  "lists only what it has loaded)"}
    r = cli(["-C", project.dir, "config", "check", "--probe"], env=project.env)
    assert f"probe parent: fake ({project.url}) warning: model deepseek/deepseek-r1 is not in" in r.stdout

    # A server that does not know the name: a failure naming the model.
    fake_provider.responder = lambda req: Fault.not_found() if req.body["model"] == "deepseek/deepseek-r1" else None
    r = cli(["--json", "-C", project.dir, "config", "check", "--probe"], env=project.env)
    assert r.returncode == 1
    parent = {p["role"]: p for p in json.loads(r.stdout)["probe"]}["parent"]
    assert parent["ok"] is False and parent["detail"].startswith(
        "model deepseek/deepseek-r1 is not in provider fake's model listing (1 models), and the request with it "
        "failed (")
    assert parent["detail"].endswith("): check the model name in [roles]")


def test_a_wrong_key_is_reported_before_a_model_the_public_listing_lacks(project, fake_provider, cli):
    project.write(dialect="openrouter", api_key="sk-or-wrong")
    fake_provider.dialect = "openrouter"
    fake_provider.api_key = "sk-or-right"
    fake_provider.models = {"qwen/qwen3-235b": (0.1, 0.2)}  # the parent's model is not listed
    r = cli(["-C", project.dir, "config", "check", "--probe"], env=project.env)
    assert r.returncode == 77
    assert (f"probe parent: fake ({project.url}) FAILED: provider fake: authentication failed; check its "
            f"API key ({KEY_VAR})") in r.stdout.splitlines()
    # The listing itself refusing the key (a generic server) names the variable too.
    project.write(api_key="sk-wrong")
    fake_provider.dialect = "generic"
    r = cli(["-C", project.dir, "config", "check", "--probe"], env=project.env)
    assert r.returncode == 77  # a refused key: a person must act
    assert (f"probe generator: fake ({project.url}) FAILED: provider fake: authentication failed; check its "
            f"API key ({KEY_VAR})") in r.stdout.splitlines()
    assert [q.path for q in fake_provider.requests if q.path != "/models"] == [
        "/chat/completions", "/chat/completions"]  # the first command's two chats; none after a refused listing


def test_an_anthropic_role_with_a_thinking_budget_is_probed_without_thinking(project, fake_provider, cli):
    project.write(protocol="anthropic", parent_model="claude-sonnet-4-5", generator_model="claude-haiku-4-5",
                  generator={"reasoning": True, "thinking_budget": 2048})
    fake_provider.models = {"claude-sonnet-4-5-20250929": (3, 15), "claude-haiku-4-5-20251001": (1, 5)}
    r = cli(["-C", project.dir, "config", "check", "--probe"], env=project.env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "model claude-haiku-4-5 listed; an authenticated 1-token chat with claude-haiku-4-5 answered" in r.stdout
    bodies = [q.body for q in fake_provider.chat_requests()]
    assert [b["max_tokens"] for b in bodies] == [1, 1] and not any("thinking" in b for b in bodies)


def test_each_training_target_is_reached_and_must_run_axolotl(tmp_path, fake_axolotl, fake_provider, cli):
    p = make_project(tmp_path, fake_axolotl)
    env = {**p.env, "OVERBRAINER_PROVIDERS__FAKE__BASE_URL": fake_provider.url}
    r = cli(["-C", p.dir, "config", "check", "--probe"], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "probe target local (local) ok: reached; axolotl, version 0.19.0" in r.stdout.splitlines()
    empty = tmp_path / "empty"
    (empty / "bin").mkdir(parents=True)
    r = cli(["-C", p.dir, "config", "check", "--probe"], env={**env, "OVERBRAINER_TARGETS__LOCAL__VENV": str(empty)})
    assert r.returncode == 1
    line = [x for x in r.stdout.splitlines() if x.startswith("probe target local")][0]
    assert line.startswith(f"probe target local (local) FAILED: axolotl is not installed in {empty}/bin (")
    assert line.endswith(f"install it with: python3.11 -m venv {empty} && {empty}/bin/pip install torch "
                         "axolotl==0.19.0")
    assert r.stderr.strip().splitlines()[-1] == "error: probe failed for target local: see the lines above"
    assert not p.runs.exists()


def test_a_runpod_target_needs_a_working_key_and_listed_gpu_types(tmp_path, fake_axolotl, fake_provider,
                                                                  fake_runpod, cli):
    p = make_project(tmp_path, fake_axolotl)
    toml = p.dir / "overbrainer.toml"
    toml.write_text(toml.read_text() + '\n[targets.gpu]\nkind = "runpod"\nmax_hours = 1\n'
                    'gpu_types = ["NVIDIA GeForce RTX 4090", "NVIDIA RTX 9999"]\n')
    env = {**p.env, "OVERBRAINER_PROVIDERS__FAKE__BASE_URL": fake_provider.url,
           "OVERBRAINER_RUNPOD__BASE_URL": fake_runpod.url, "OVERBRAINER_RUNPOD__API_KEY": "rpa_wrong"}
    r = cli(["-C", p.dir, "config", "check", "--probe"], env=env)
    assert r.returncode == 77  # a refused key
    assert ("probe target gpu (runpod) FAILED: Runpod refused the API key (401): check OVERBRAINER_RUNPOD__API_KEY"
            in r.stdout.splitlines())
    env["OVERBRAINER_RUNPOD__API_KEY"] = fake_runpod.account_key
    r = cli(["-C", p.dir, "config", "check", "--probe"], env=env)
    assert r.returncode == 1
    assert ("probe target gpu (runpod) FAILED: `NVIDIA RTX 9999` is not in Runpod's GPU catalog: `overbrainer "
            "pod gpus` lists the GPU types") in r.stdout.splitlines()
    toml.write_text(toml.read_text().replace(', "NVIDIA RTX 9999"', ""))
    r = cli(["-C", p.dir, "config", "check", "--probe"], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ("probe target gpu (runpod) ok: the API key reads the GPU catalog; every GPU type asked for is offered "
            "(in stock now: NVIDIA GeForce RTX 4090)") in r.stdout.splitlines()
    assert [c.path for c in fake_runpod.calls] == ["/catalog/gpus"] * 3  # nothing rented


def test_a_cluster_shape_the_catalog_refuses_is_a_configuration_error(tmp_path, fake_axolotl, fake_provider,
                                                                       fake_runpod, cli):
    """More GPUs a pod than the type's `maxCount` is a key to fix (exit 2, one line naming it and
    the limit), whether the catalog scoped to `gpu_count` lists the type or leaves it out; a
    catalog that cannot be reached stays a probe failure (exit 1)."""
    p = make_project(tmp_path, fake_axolotl)
    toml = p.dir / "overbrainer.toml"
    toml.write_text(toml.read_text() + '\n[targets.big]\nkind = "runpod"\nmax_hours = 1\nnodes = 2\n'
                    'gpu_count = 8\ngpu_types = ["NVIDIA RTX A6000"]\n')
    env = {**p.env, "OVERBRAINER_PROVIDERS__FAKE__BASE_URL": fake_provider.url,
           "OVERBRAINER_RUNPOD__BASE_URL": fake_runpod.url, "OVERBRAINER_RUNPOD__API_KEY": fake_runpod.account_key}
    fake_runpod.gpus["NVIDIA RTX A6000"].max_count = 4
    refused = ("targets.big.gpu_count = 8: Runpod's catalog allows at most 4 of `NVIDIA RTX A6000` per pod of a "
               "cluster (maxCount): lower gpu_count or change targets.big.gpu_types")
    r = cli(["-C", p.dir, "config", "check", "--probe"], env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"probe target big (runpod) FAILED: {refused}" in r.stdout.splitlines()
    assert r.stderr.strip().splitlines()[-1] == f"error: {refused}"
    scoped, ceilings = (c.query for c in fake_runpod.calls_to("GET", "/catalog/gpus"))
    assert (scoped["product"], scoped["count"], ceilings["product"], ceilings["count"]) == \
        ("CLUSTER", "8", "CLUSTER", "1")  # the listing for 8 a pod left the type out: its ceiling read for 1

    fake_runpod.inject(RunpodFault(503, "GET", "/catalog/gpus"))  # the catalog cannot be reached: try again later
    r = cli(["-C", p.dir, "config", "check", "--probe"], env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.strip().splitlines()[-1] == "error: probe failed for target big: see the lines above"

    toml.write_text(toml.read_text().replace("gpu_count = 8", "gpu_count = 4"))
    r = cli(["-C", p.dir, "config", "check", "--probe"], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not fake_runpod.clusters() and not fake_runpod.billing()  # nothing rented
