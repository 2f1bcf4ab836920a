"""The pod command (`args`) and env built by overbrainer.runpod.pod_scripts."""

from __future__ import annotations

import base64
import shlex

import pytest

from overbrainer import __version__
from overbrainer.runpod import pod_spec as pod_scripts
from overbrainer.runpod.pod_spec import PodSettings, pod_env

CLIENT = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB7m overbrainer-r1"


def settings(**kw) -> PodSettings:
    base = dict(run_id="proj_20261203-071800", authorized_key=CLIENT, max_seconds=7_200,
                boot_grace_secs=1_800, retrieve_grace_secs=3_600,
                max_cost_usd=20.0, api_url="http://127.0.0.1:8080/v2/")
    base.update(kw)
    return PodSettings(**base)


def test_args_is_a_short_sh_c_and_the_bootstrap_travels_in_the_env():
    args = pod_scripts.pod_args()
    assert isinstance(args, str) and len(args) < 200
    words = shlex.split(args)  # what an image without ENTRYPOINT runs, or a wrapper's "$@"
    assert words[:2] == ["sh", "-c"] and len(words) == 3 and "'" not in words[2]
    assert "$OVERBRAINER_BOOTSTRAP" in words[2] and "base64 -d" in words[2] and 'eval "$b"' in words[2]
    text = base64.b64decode(pod_env(settings())[pod_scripts.BOOTSTRAP_ENV]).decode()
    assert text == pod_scripts.bootstrap_text() and pod_scripts.WATCHDOG_MARKER not in text
    assert f"WATCHDOG_SH={shlex.quote(pod_scripts.script('watchdog.sh'))}\n" in text
    assert len(pod_scripts.bootstrap_value()) < 100 * 1024


def test_the_env_names_the_host_key_secret_and_holds_no_secret():
    env = pod_env(settings())
    assert env["OVERBRAINER_HOST_KEY"] == "{{ RUNPOD_SECRET_overbrainer_host_key_proj_20261203-071800 }}"
    assert env["OVERBRAINER_RUN_ID"] == "proj_20261203-071800"
    assert env["OVERBRAINER_RUN_DIR"] == "/workspace/overbrainer/proj_20261203-071800"
    assert env["OVERBRAINER_API_URL"] == "http://127.0.0.1:8080/v2"
    assert env["OVERBRAINER_AUTHORIZED_KEY"] == CLIENT
    assert env["OVERBRAINER_MAX_SECONDS"] == "7200"  # a duration: the pod counts it on its own clock
    assert "OVERBRAINER_DEADLINE" not in env and "OVERBRAINER_STARTED" not in env  # no time of ours
    assert len(env) <= pod_scripts.ENV_LIMIT
    assert env["OVERBRAINER_MAX_COST_USD"] == "20.0000" and env["OVERBRAINER_KEEP_POD"] == "0"
    assert env["OVERBRAINER_VERSION"] == __version__ and env["JUPYTER_DISABLE"] == "1"
    assert not any("TOKEN" in k or k.startswith("RUNPOD_") for k in env)
    assert all(isinstance(v, str) for v in env.values())


def test_a_kept_pod_has_no_deadline_and_no_cost_cap():
    env = pod_env(settings(keep=True))
    assert "OVERBRAINER_MAX_SECONDS" not in env and "OVERBRAINER_MAX_COST_USD" not in env
    assert env["OVERBRAINER_KEEP_POD"] == "1"
    assert env["OVERBRAINER_BOOT_GRACE"] == "1800"  # boot grace still applies


def test_the_time_scale_shortens_the_paces_but_not_the_user_limits_or_the_caps():
    env = pod_env(settings(time_scale=0.01))
    assert env["OVERBRAINER_WATCHDOG_INTERVAL_MS"] == "600"
    assert env["OVERBRAINER_WATCHDOG_PROBE_WAIT_MS"] == "100"
    assert env["OVERBRAINER_WATCHDOG_CURL_MS"] == "10000" and env["OVERBRAINER_SSHD_WAIT_MS"] == "10000"
    assert env["OVERBRAINER_BOOT_GRACE"] == "1800" and env["OVERBRAINER_RETRIEVE_GRACE"] == "3600"
    assert pod_env(settings())["OVERBRAINER_WATCHDOG_INTERVAL_MS"] == "60000"


@pytest.mark.parametrize("bad", [dict(run_id="../x"), dict(authorized_key="ssh-ed25519 AAAA\nssh-rsa BBBB"),
                                 dict(authorized_key="not a key"), dict(api_url="ftp://x"),
                                 dict(gpu_count=0)])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError):
        pod_env(settings(**bad))


def test_the_create_body_holds_args_and_at_most_fifty_env_entries():
    from overbrainer.config.model import RunpodTarget
    from overbrainer.runpod.pod_spec import create_body

    target = RunpodTarget(name="pod", kind="runpod", gpu_types=["G"], max_hours=1.0)
    body = create_body(target, name="overbrainer-r-1", gpu_type="G", env=pod_env(settings()))
    assert body["args"] == pod_scripts.pod_args() and "cmd" not in body and "dataCenterIds" not in body
    assert set(body) == {"name", "image", "args", "cloud", "gpu", "disk", "ports", "startSsh", "env"}
    with pytest.raises(ValueError, match="over Runpod's 50"):
        create_body(target, name="overbrainer-r-1", gpu_type="G", env={f"K{i}": "v" for i in range(51)})
