"""`[hub] after_training = true`: `train` (and `train attach`) push the run once it came back;
a push that fails only warns; a missing token is said before the training starts; a missing `hub`
extra stops `train` and `run` before they start, and only warns once a run is trained."""

from __future__ import annotations

import json

from tests.fixtures.missing import without_extras
from tests.integration.test_runs_support import make_project


def _hub_after_training(p, extra: str = "") -> None:
    toml = p.dir / "overbrainer.toml"
    toml.write_text(toml.read_text() + f'\n[hub]\nrepo = "alice/child"\nafter_training = true\n{extra}')


def test_train_pushes_a_succeeded_run_once(tmp_path, fake_axolotl, fake_hub):
    p = make_project(tmp_path, fake_axolotl)
    _hub_after_training(p)
    p.env.update(OVERBRAINER_HF_TOKEN=fake_hub.token, OVERBRAINER_HUB__BASE_URL=fake_hub.url)
    r = p.run("train")
    assert r.returncode == 0, r.stderr
    rid = p.run_ids()[0]
    record = json.loads((p.runs / rid / "hub" / "push.json").read_text())
    assert record["repo"] == "alice/child"
    repo = fake_hub.repos["alice/child"]
    assert len(repo.commits) == 1 and "adapter_model.safetensors" in repo.files
    assert r.stdout.splitlines()[-1].startswith(f"push: {fake_hub.url}/alice/child/commit/")
    assert "not supported" not in r.stderr and fake_hub.token not in r.stdout + r.stderr
    commits = len(repo.commits)
    r = p.run("train", "attach", rid)  # already pushed: nothing sent again
    assert r.returncode == 0, r.stderr
    assert len(repo.commits) == commits and "already pushed" in r.stderr


def test_a_failed_push_after_training_only_warns(tmp_path, fake_axolotl, fake_hub):
    p = make_project(tmp_path, fake_axolotl)
    _hub_after_training(p)
    p.env.update(OVERBRAINER_HF_TOKEN=fake_hub.token, OVERBRAINER_HUB__BASE_URL=fake_hub.url)
    fake_hub.fault("whoami", 401, None)
    r = p.run("train")
    assert r.returncode == 0, r.stderr
    rid = p.run_ids()[0]
    assert "push failed: Hugging Face refused the token" in r.stderr
    assert f"run it again with: overbrainer push {rid}" in r.stderr
    assert not (p.runs / rid / "hub" / "push.json").exists()


def test_a_missing_token_is_said_before_training_and_nothing_is_pushed(tmp_path, fake_axolotl, fake_hub):
    p = make_project(tmp_path, fake_axolotl)
    _hub_after_training(p)
    p.env.update(OVERBRAINER_HUB__BASE_URL=fake_hub.url)
    r = p.run("train")
    assert r.returncode == 0, r.stderr
    first = next(i for i, line in enumerate(r.stderr.splitlines()) if "OVERBRAINER_HF_TOKEN is not" in line)
    started = next(i for i, line in enumerate(r.stderr.splitlines()) if "train: run" in line)
    assert first < started
    assert fake_hub.calls == []


def test_a_failed_training_is_not_pushed(tmp_path, fake_axolotl, fake_hub):
    p = make_project(tmp_path, fake_axolotl)
    _hub_after_training(p)
    p.env.update(OVERBRAINER_HF_TOKEN=fake_hub.token, OVERBRAINER_HUB__BASE_URL=fake_hub.url)
    fake_axolotl.set_mode("fail")
    r = p.run("train")
    assert r.returncode == 1
    assert fake_hub.calls == []


def test_without_the_hub_extra_train_and_run_stop_before_they_start(tmp_path, fake_axolotl, fake_hub):
    p = make_project(tmp_path, fake_axolotl)
    _hub_after_training(p)
    p.env.update(OVERBRAINER_HF_TOKEN=fake_hub.token, OVERBRAINER_HUB__BASE_URL=fake_hub.url)
    p.env.update(without_extras(tmp_path, "hub", env=p.env))
    line = "error: [hub] after_training needs the hub extra: pip install 'overbrainer[hub]'\n"
    before = sorted((p.dir / "data").rglob("*"))
    for command in (["train"], ["run"]):
        r = p.run(*command)
        assert (r.returncode, r.stderr) == (2, line), command
    assert p.run_ids() == [] and sorted((p.dir / "data").rglob("*")) == before and fake_hub.calls == []


def test_a_run_trained_before_the_hub_extra_went_is_attached_and_only_warns(tmp_path, fake_axolotl, fake_hub):
    p = make_project(tmp_path, fake_axolotl)
    _hub_after_training(p)
    p.env.update(OVERBRAINER_HUB__BASE_URL=fake_hub.url)  # no token: trained, not pushed
    assert p.run("train").returncode == 0
    rid = p.run_ids()[0]
    p.env.update(OVERBRAINER_HF_TOKEN=fake_hub.token, **without_extras(tmp_path, "hub", env=p.env))
    r = p.run("train", "attach", rid)
    assert r.returncode == 0, r.stderr
    assert ("push skipped: [hub] after_training needs the hub extra: pip install 'overbrainer[hub]'; push run "
            f"{rid} later with: overbrainer push {rid}") in r.stderr
    assert fake_hub.calls == [] and not (p.runs / rid / "hub" / "push.json").exists()
