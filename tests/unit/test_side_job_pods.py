"""What a side job's own pod asks Runpod for, and what an export sends to its target as a secret."""

from __future__ import annotations

import json
from overbrainer.config.model import Config, Hub, LocalTarget, Project, Role, Roles, RunpodTarget
from overbrainer.config.secrets import Secret
from overbrainer.runpod import side_pods as pod
from overbrainer.export.gate import Source
from overbrainer.export.job import export_part
from overbrainer.jobs.run_record import RunRecord
from overbrainer.runpod.catalog import vram_floor


def _config(**kw) -> Config:
    """A configuration with what these tests read set (roles: the required minimum)."""
    return Config(project=Project("demo"), roles=Roles(generator=Role("p", "g"), parent=Role("p", "q")), **kw)


def test_the_vram_floor_is_ceil_of_1_2_times_the_bytes_plus_2_gb():
    assert vram_floor(98_000_000) == 3          # ceil(0.1176) + 2
    assert vram_floor(270_900_000) == 3         # ceil(0.325) + 2
    assert vram_floor(5_000_000_000) == 8       # ceil(6.0) + 2
    assert vram_floor(5_000_000_001) == 9       # a byte over: the next GB


def test_a_side_pod_takes_max_hours_the_image_and_a_floor_only_for_auto_without_min_vram():
    auto = RunpodTarget(name="gpu", kind="runpod", gpu_types="auto", max_hours=6)
    assert pod.settings(auto, 0.5, image="img:1", model_bytes=5_000_000_000) == {
        "max_hours": 0.5, "nodes": 1, "image": "img:1", "min_vram_gb": 8}
    assert pod.settings(auto, 1.0, model_bytes=None) == {"max_hours": 1.0, "nodes": 1}  # size unknown: no floor
    listed = RunpodTarget(name="gpu", kind="runpod", gpu_types=["NVIDIA A40"], max_hours=6)
    assert pod.settings(listed, 1.0, model_bytes=5_000_000_000) == {"max_hours": 1.0, "nodes": 1}
    floor = RunpodTarget(name="gpu", kind="runpod", gpu_types="auto", max_hours=6, min_vram_gb=24)
    assert not pod.needs_floor(floor) and pod.settings(floor, 1.0, model_bytes=9e9) == {"max_hours": 1.0, "nodes": 1}
    assert pod.settings(LocalTarget(name="here", kind="local"), 1.0, image="x", model_bytes=9e9) == {}
    cluster = RunpodTarget(name="gpu", kind="runpod", gpu_types=["NVIDIA A40"], max_hours=6, nodes=4)
    assert pod.settings(cluster, 1.0)["nodes"] == 1  # an export or a compare takes one pod, never a cluster


def test_a_local_base_models_safetensors_give_its_size_and_no_base_model_warns(tmp_path, caplog):
    (tmp_path / "a.safetensors").write_bytes(b"x" * 1000)
    (tmp_path / "b.safetensors").write_bytes(b"x" * 234)
    (tmp_path / "config.json").write_text("{}")
    assert pod.base_model_bytes(_config(), str(tmp_path)) == 1234
    assert pod.base_model_bytes(_config(), None) is None
    assert "names no base_model" in caplog.text


def _source(tmp_path, adapter: bool) -> Source:
    run_dir = tmp_path / "runs" / "demo_20261201-101010"
    (run_dir / "output").mkdir(parents=True)
    (run_dir / "output" / ("adapter_config.json" if adapter else "config.json")).write_text(json.dumps({}))
    record = RunRecord(id=run_dir.name, target="gpu", created="2026-12-01T10:10:10Z", remote_dir="", state="succeeded")
    return Source(record, run_dir, "output")


def test_an_adapter_gets_the_hf_token_as_the_jobs_secret_never_in_its_env(tmp_path):
    target = RunpodTarget(name="gpu", kind="runpod", gpu_types="auto", max_hours=6)
    config = _config(hf_token=Secret("hf_s3cr3t_value", environ={}))
    part = export_part(config, _source(tmp_path / "a", adapter=True), "Q4_K_M", target)
    assert part.secrets == {"HF_TOKEN": "hf_s3cr3t_value"}
    assert "hf_s3cr3t_value" not in json.dumps(part.env) and "hf_s3cr3t_value" not in json.dumps(part.files)
    full = export_part(config, _source(tmp_path / "f", adapter=False), "Q4_K_M", target)
    assert full.secrets == {}  # a full model fetches nothing
    assert export_part(_config(), _source(tmp_path / "n", adapter=True), "F16",
                       target).secrets == {}


def test_the_base_models_size_comes_from_the_hubs_safetensors_count(fake_hub, caplog):
    from overbrainer.errors import OverbrainerError

    config = _config(hub=Hub(base_url=fake_hub.url), hf_token=Secret(fake_hub.token, environ={}))
    assert pod.hub_parameters(config, "Qwen/Qwen3-0.6B") == 751_632_384
    assert pod.base_model_bytes(config, "Qwen/Qwen3-0.6B") == 2 * 751_632_384  # 16 bits a parameter
    call = [c for c in fake_hub.calls if c.route == "repo"][-1]
    assert "expand%5B%5D=safetensors" in call.path or "expand[]=safetensors" in call.path
    fake_hub.models["acme/no-safetensors"] = {}
    try:
        pod.hub_parameters(config, "acme/no-safetensors")
        raise AssertionError("no count, no size")
    except OverbrainerError as e:
        assert str(e) == "its metadata gives no safetensors parameter count"
    assert pod.base_model_bytes(config, "acme/missing") is None
    assert ("cannot read the size of acme/missing on the Hugging Face Hub (the Hub answered 404): no VRAM floor"
            in caplog.text)
    dead = _config(hub=Hub(base_url="http://127.0.0.1:9"))
    assert pod.base_model_bytes(dead, "Qwen/Qwen3-0.6B") is None
    assert "the Hub did not answer: connection refused" in caplog.text


def test_the_fake_hub_refuses_an_expand_property_the_hub_does_not_know(fake_hub):
    """The client's `expand[]` must be one the Hub lists: the fake answers 400 to any other, as the Hub does."""
    import requests

    url = f"{fake_hub.url}/api/models/Qwen/Qwen3-0.6B"
    auth = {"Authorization": f"Bearer {fake_hub.token}"}
    bad = requests.get(url, params={"expand[]": "parameterCount"}, headers=auth, timeout=10)
    assert bad.status_code == 400 and "parameterCount" in bad.text
    good = requests.get(url, params={"expand[]": "safetensors"}, headers=auth, timeout=10)
    assert good.status_code == 200 and good.json()["safetensors"]["total"] == 751_632_384
