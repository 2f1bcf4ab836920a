"""The pod command and env built by overbrainer.runpod.pod_scripts."""

from __future__ import annotations

import base64
import shlex

import pytest

from overbrainer import __version__
from overbrainer.runpod import pod_scripts
from overbrainer.runpod.pod_scripts import PodSettings, pod_env

CLIENT = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB7m overbrainer-r1"


def settings(**kw) -> PodSettings:
    base = dict(run_id="proj_20261203-071800", authorized_key=CLIENT, started_unix=1_000,
                deadline_unix=1_000 + 7_200, boot_grace_secs=1_800, retrieve_grace_secs=3_600,
                max_cost_usd=20.0, api_url="http://127.0.0.1:8080/v2/")
    base.update(kw)
    return PodSettings(**base)


def test_the_cmd_is_bash_running_the_bootstrap_with_the_watchdog_inside():
    cmd = pod_scripts.pod_cmd()
    assert cmd[:2] == ["bash", "-c"]
    assert sum(len(c.encode()) for c in cmd) < 100 * 1024
    assert pod_scripts.WATCHDOG_MARKER not in cmd[2]
    assert f"WATCHDOG_SH={shlex.quote(pod_scripts.script('watchdog.sh'))}\n" in cmd[2]
    assert shlex.split(pod_scripts.pod_args()) == cmd


def test_the_env_names_the_host_key_secret_and_holds_no_secret():
    env = pod_env(settings())
    assert env["OVERBRAINER_HOST_KEY"] == "{{ RUNPOD_SECRET_overbrainer_host_key_proj_20261203-071800 }}"
    assert env["OVERBRAINER_RUN_ID"] == "proj_20261203-071800"
    assert env["OVERBRAINER_RUN_DIR"] == "/workspace/overbrainer/proj_20261203-071800"
    assert env["OVERBRAINER_API_URL"] == "http://127.0.0.1:8080/v2"
    assert env["OVERBRAINER_AUTHORIZED_KEY"] == CLIENT
    assert env["OVERBRAINER_DEADLINE"] == "8200" and env["OVERBRAINER_STARTED"] == "1000"
    assert env["OVERBRAINER_MAX_COST_USD"] == "20.0000" and env["OVERBRAINER_KEEP_POD"] == "0"
    assert env["OVERBRAINER_VERSION"] == __version__ and env["JUPYTER_DISABLE"] == "1"
    assert not any("TOKEN" in k or k.startswith("RUNPOD_") for k in env)
    assert all(isinstance(v, str) for v in env.values())


def test_a_kept_pod_has_no_deadline_and_no_cost_cap():
    env = pod_env(settings(keep=True))
    assert "OVERBRAINER_DEADLINE" not in env and "OVERBRAINER_MAX_COST_USD" not in env
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


def test_the_host_key_secret_value_is_one_base64_line():
    text = "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n"
    value = pod_scripts.host_key_secret_value(text)
    assert "\n" not in value and base64.b64decode(value).decode() == text
