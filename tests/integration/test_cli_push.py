"""`overbrainer push` end to end: a run trained by the fake axolotl, pushed by the real CLI (in a
subprocess) to the fake Hub (tests/fixtures/hub.py)."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.fixtures.missing import without_extras
from tests.integration.test_runs_support import make_project

BIG = 1_500_000  # above the fake Hub's LFS threshold


@pytest.fixture
def pushable(tmp_path, fake_axolotl, fake_hub):
    """A project whose one run succeeded (adapter + merged model + a large file), set to push to
    the fake Hub: (project, run_id)."""
    p = make_project(tmp_path, fake_axolotl, merge=True)
    r = p.run("train")
    assert r.returncode == 0, r.stderr
    rid = p.run_ids()[0]
    out = p.runs / rid / "output"
    (out / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 16}))
    (out / "tokenizer.json").write_bytes(bytes(range(256)) * (BIG // 256))
    (out / "debug.log").write_text("not pushed\n")
    (out / ".hidden").write_text("not pushed\n")
    (out / "README.md").write_text("not pushed: the card goes there\n")
    p.env.update(OVERBRAINER_HF_TOKEN=fake_hub.token, OVERBRAINER_HUB__BASE_URL=fake_hub.url)
    return p, rid


EXPECTED = ["adapter_config.json", "adapter_model.safetensors", "merged/model.safetensors", "tokenizer.json"]


def test_push_creates_a_private_repo_and_commits_every_file_and_the_card(pushable, fake_hub):
    p, rid = pushable
    r = p.run("push", rid)
    assert r.returncode == 0, r.stderr
    repo = fake_hub.repos["alice/train-demo"]
    assert repo.private is True
    assert sorted(repo.files) == sorted(EXPECTED + ["README.md"])
    out = p.runs / rid / "output"
    for path in EXPECTED:
        assert repo.files[path] == (out / path).read_bytes(), path
    assert len(repo.commits) == 1 and repo.commits[0][1] == f"Upload run {rid} with overbrainer 0.1.0"
    oid = repo.commits[0][0]
    assert r.stdout == f"push: {fake_hub.url}/alice/train-demo/commit/{oid} (5 files, 1.5 MB)\n"
    create = next(c for c in fake_hub.calls if c.route == "create")
    assert json.loads(create.body)["visibility"] == "private"
    # The large files went through LFS uploads, the small one inside the commit.
    uploaded = {c.path.rsplit("/", 1)[1] for c in fake_hub.calls if c.route == "upload"}
    assert hashlib.sha256((out / "tokenizer.json").read_bytes()).hexdigest() in uploaded
    card = repo.files["README.md"].decode()
    assert card.rstrip().endswith("<!-- overbrainer:card -->")
    assert "base_model: Qwen/Qwen3-0.6B" in card and "license: apache-2.0" in card
    record = json.loads((p.runs / rid / "hub" / "push.json").read_text())
    assert record["state"] == "pushed" and record["commit"] == oid and record["private"] is True
    assert sorted(record["files"]) == sorted(EXPECTED + ["README.md"])
    # Progress went through the event bus as upload lines (stderr is not a terminal).
    assert "push: uploading" in r.stderr and "of 1.5 MB" in r.stderr
    assert fake_hub.token not in r.stdout + r.stderr


def test_dry_run_sends_nothing_and_writes_the_card_copy(pushable, fake_hub):
    p, rid = pushable
    r = p.run("push", rid, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert fake_hub.calls == []
    assert r.stdout.splitlines() == [
        "push: <you>/train-demo, private when created; nothing is sent (--dry-run)",
        "adapter_config.json        30 B",
        "adapter_model.safetensors  13 B",
        "merged/model.safetensors   18 B",
        "tokenizer.json             1.5 MB",
        f"push: 4 files, 1.5 MB, and the card README.md (runs/{rid}/hub/README.md)",
    ]
    card = (p.runs / rid / "hub" / "README.md").read_text()
    assert card.startswith("---\nbase_model: Qwen/Qwen3-0.6B\n") and "# <you>/train-demo" not in card
    assert "# &lt;you&gt;/train-demo" in card
    assert not (p.runs / rid / "hub" / "push.json").exists()
    # --repo and --public are shown as they would apply; no token is needed for a dry run.
    p.env.pop("OVERBRAINER_HF_TOKEN")
    r = p.run("--json", "push", rid, "--dry-run", "--repo", "org/model", "--public")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["repo"] == "org/model" and data["private"] is False and data["dry_run"] is True
    assert [f["path"] for f in data["files"]] == EXPECTED and fake_hub.calls == []


def test_a_commit_cut_off_midway_is_finished_by_running_push_again(pushable, fake_hub):
    p, rid = pushable
    fake_hub.cut_commit()
    r = p.run("push", rid)
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1].startswith(
        "error: the commit to alice/train-demo was cut off (")
    assert r.stderr.splitlines()[-1].endswith("): run it again to finish (uploaded files are not sent again)")
    repo = fake_hub.repos["alice/train-demo"]
    assert repo.files == {} and repo.commits == []
    record = json.loads((p.runs / rid / "hub" / "push.json").read_text())
    assert record["state"] == "uploaded" and "commit" not in record
    uploads_before = fake_hub.routes().count("upload")
    assert uploads_before == 3  # the three LFS files (safetensors ×2, the large tokenizer.json)
    r = p.run("push", rid)
    assert r.returncode == 0, r.stderr
    assert "resuming the push of" in r.stderr
    assert fake_hub.routes().count("upload") == uploads_before  # nothing uploaded twice
    assert fake_hub.routes().count("create") == 1
    assert sorted(repo.files) == sorted(EXPECTED + ["README.md"]) and len(repo.commits) == 1
    assert json.loads((p.runs / rid / "hub" / "push.json").read_text())["state"] == "pushed"


@pytest.mark.parametrize("route,status,headers,message", [
    ("whoami", 401, None, "Hugging Face refused the token: set OVERBRAINER_HF_TOKEN to a token with write access"),
    ("whoami", 403, None, "Hugging Face refused the token: set OVERBRAINER_HF_TOKEN to a token with write access"),
    ("create", 403, None, "the Hugging Face token needs write access to alice"),
    ("whoami", 429, {"Retry-After": "30"}, "Hugging Face rate limit, retry later (in 30 s)"),
    ("commit", 500, None, "the Hugging Face Hub failed (500 on commit): nothing was committed, "
                          "run it again later to resume"),
])
def test_hub_refusals_are_one_clear_line(pushable, fake_hub, route, status, headers, message):
    p, rid = pushable
    fake_hub.fault(route, status, headers)
    r = p.run("push", rid)
    assert r.returncode == (77 if status in (401, 403) else 1)  # a token refused: a person must act
    errors = [line for line in r.stderr.splitlines() if "error" in line.lower()]
    assert errors == [f"error: {message}"]
    assert fake_hub.token not in r.stdout + r.stderr
    assert "alice/train-demo" not in fake_hub.repos or fake_hub.repos["alice/train-demo"].commits == []


def test_a_hub_that_is_down_stops_the_push_at_once(pushable, fake_hub):
    p, rid = pushable
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    p.env["OVERBRAINER_HUB__BASE_URL"] = f"http://127.0.0.1:{port}"
    r = p.run("push", rid)
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1] == (f"error: cannot reach the Hugging Face Hub at 127.0.0.1:{port} "
                                         f"(ConnectError) during whoami: nothing was committed, run it again to resume")
    assert not (p.runs / rid / "hub" / "push.json").exists()


def test_the_repos_own_readme_is_kept_unless_overwrite_card(pushable, fake_hub):
    p, rid = pushable
    fake_hub.add_repo("alice/train-demo", private=True, files={"README.md": b"# mine\n"})
    r = p.run("push", rid)
    assert r.returncode == 0, r.stderr
    assert "kept the repo's own README.md (use --overwrite-card" in r.stderr
    assert "repo alice/train-demo exists and stays private" in r.stderr
    repo = fake_hub.repos["alice/train-demo"]
    assert repo.files["README.md"] == b"# mine\n" and "create" not in fake_hub.routes()
    r = p.run("push", rid, "--overwrite-card")
    assert r.returncode == 0, r.stderr
    assert repo.files["README.md"].decode().rstrip().endswith("<!-- overbrainer:card -->")
    # Our own card is replaced without the flag.
    r = p.run("push", rid)
    assert r.returncode == 0, r.stderr and "kept the repo's own" not in r.stderr


def test_a_private_push_into_a_public_repo_is_refused_before_any_upload(pushable, fake_hub):
    p, rid = pushable
    fake_hub.add_repo("alice/train-demo", private=False)
    r = p.run("push", rid)
    assert r.returncode == 1
    assert r.stderr.splitlines()[-1] == ("error: repo alice/train-demo is public and this push is private: "
                                         "pass --public to push into it, or pick another --repo")
    assert not {"preupload", "batch", "upload", "commit"} & set(fake_hub.routes())
    r = p.run("--json", "push", rid, "--public")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert data["private"] is False and data["repo"] == "alice/train-demo" and data["card"] == "written"
    assert data["files"][-1] == "README.md" and data["size"] == sum(
        (p.runs / rid / "output" / f).stat().st_size for f in EXPECTED)


def test_push_refuses_what_cannot_be_pushed(pushable, fake_hub):
    p, rid = pushable
    p.env.pop("OVERBRAINER_HF_TOKEN")
    r = p.run("push", rid)
    assert r.returncode == 77 and r.stderr.splitlines()[-1].startswith("error: OVERBRAINER_HF_TOKEN is not set: ")
    r = p.run("push", rid, "--repo", "no-slash", "--dry-run")
    assert r.returncode == 2 and r.stderr.splitlines()[-1] == (
        "error: --repo must be exactly NAMESPACE/NAME (got 'no-slash')")
    record = json.loads((p.runs / rid / "run.json").read_text())
    record["state"] = "failed"
    (p.runs / rid / "run.json").write_text(json.dumps(record))
    r = p.run("push", rid, "--dry-run")
    assert r.returncode == 1 and r.stderr.splitlines()[-1] == (
        f"error: run {rid} is failed: only a succeeded or stopped run can be pushed")
    assert fake_hub.calls == []


def test_push_without_the_hub_extra_says_how_to_install_it_and_a_dry_run_needs_none(pushable, fake_hub, tmp_path):
    p, rid = pushable
    p.env.update(without_extras(tmp_path, "hub", env=p.env))
    r = p.run("push", rid)
    assert (r.returncode, r.stderr) == (2, "error: overbrainer push needs the hub extra: pip install 'overbrainer[hub]'\n")
    r = p.run("push", "--dataset")
    assert (r.returncode, r.stderr.splitlines()[-1]) == (2, "error: overbrainer push needs the hub extra: pip install "
                                                             "'overbrainer[hub]'")
    r = p.run("push", rid, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert (p.runs / rid / "hub" / "README.md").is_file() and fake_hub.calls == []


MARKERS = {
    "OVERBRAINER_PROVIDERS__MARKERPROV__API_KEY": "sk-markerkey-provider-0001",
    "OVERBRAINER_PROVIDERS__MARKERPROV__BASE_URL": "https://markerhost-provider.example/v1",
    "OVERBRAINER_RUNPOD__API_KEY": "rpa_markerkey_runpod_0002",
    "OVERBRAINER_RUNPOD__BASE_URL": "https://markerhost-runpod.example/v2",
    "OVERBRAINER_TARGETS__MARKERSSH__HOST": "markeruser@markerhost-ssh.example",
}


def test_the_card_holds_no_key_host_url_or_provider_name(tmp_path, fake_axolotl, fake_hub):
    """Markers in every secret, URL, host, provider and target name of the settings; none may
    reach the card, the output or a file the push writes."""
    p = make_project(tmp_path, fake_axolotl, remote=tmp_path / "remote")
    toml = (p.dir / "overbrainer.toml").read_text()
    toml = (toml.replace("fake", "markerprov").replace('target = "local"', 'target = "markertgt"').replace("targets.local", "targets.markertgt")
            .replace("targets.remote", "targets.markerssh")
            .replace("merge = false", 'merge = false\naxolotl_extra = { hub_token = "markerextra-token-0003", '
                     'chat_template_jinja = "/home/markeruser/markerpath.jinja", wandb_project = "markerwandb", '
                     'warmup_steps = 3 }'))
    (p.dir / "overbrainer.toml").write_text(toml)
    r = p.run("train")
    assert r.returncode == 0, r.stderr
    rid = p.run_ids()[0]
    p.env.update(MARKERS, OVERBRAINER_HF_TOKEN=fake_hub.token, OVERBRAINER_HUB__BASE_URL=fake_hub.url)
    dry = p.run("push", rid, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    r = p.run("push", rid)
    assert r.returncode == 0, r.stderr
    card = fake_hub.repos["alice/train-demo"].files["README.md"].decode()
    assert card == (p.runs / rid / "hub" / "README.md").read_text()
    assert "warmup_steps = 3" in card and "[training]" in card  # the allowlisted excerpt is there
    written = "".join(f.read_text() for f in (p.runs / rid / "hub").iterdir())
    for text in (card, r.stdout, r.stderr, dry.stdout, dry.stderr, written):
        assert "marker" not in text.lower(), [line for line in text.splitlines() if "marker" in line.lower()]
        assert fake_hub.token not in text
    # The token reached the Hub only as the Authorization header.
    assert all(fake_hub.token.encode() not in c.body for c in fake_hub.calls)


def test_ctrl_c_during_the_uploads_commits_nothing_and_a_rerun_finishes(pushable, fake_hub):
    import signal
    import threading

    p, rid = pushable
    fake_hub.upload_gate = threading.Event()
    proc = p.popen("push", rid)
    try:
        p.wait_for(lambda: "upload-held" in fake_hub.routes(), what="an upload to start")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        fake_hub.upload_gate.set()
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "error: push cancelled: nothing was committed, run it again to resume"
    assert out == "" and fake_hub.repos["alice/train-demo"].commits == []
    assert "commit" not in fake_hub.routes()
    fake_hub.upload_gate = None
    r = p.run("push", rid)
    assert r.returncode == 0, r.stderr
    assert sorted(fake_hub.repos["alice/train-demo"].files) == sorted(EXPECTED + ["README.md"])


def test_a_push_leaves_ctrl_c_as_it_found_it(pushable, fake_hub):
    """The push catches Ctrl-C while it sends; once it returned, the handler it installed is gone
    (it was left installed, its watcher thread running, for whatever the command did next)."""
    import io
    import signal

    from overbrainer.config.load import load_config
    from overbrainer.front.frontend import Cli
    from overbrainer.front.session import Session
    from overbrainer.hub.flow import push_flow

    p, rid = pushable
    session = Session(p.dir, Cli(stdout=io.StringIO(), stderr=io.StringIO()), load_config(p.dir, environ=dict(p.env)))
    before = signal.getsignal(signal.SIGINT)
    result = push_flow(session, rid)
    assert result["repo"] == "alice/train-demo" and fake_hub.repos["alice/train-demo"].commits
    assert signal.getsignal(signal.SIGINT) is before
