"""The target interface (jobs/kinds.py; jobs.lease.KINDS, jobs.records.RECORDS): every kind of
target the configuration accepts has its kind and its records in the job layer, and only
Runpod's is made for each job."""

from __future__ import annotations

import pytest

from overbrainer.config.model import TARGET_KINDS, LocalTarget, RunpodTarget, SshTarget
from overbrainer.errors import ConfigError
from overbrainer.jobs.lease import KINDS, is_pod, kind_of
from overbrainer.jobs.records import RECORDS
from overbrainer.runpod.records import RUNPOD_RECORDS
from overbrainer.runpod.target import RUNPOD


def test_every_configured_kind_of_target_has_its_kind_in_the_job_layer():
    assert sorted(KINDS) == sorted(TARGET_KINDS) == sorted(RECORDS)
    assert [name for name, kind in KINDS.items() if kind.made_for_job] == ["runpod"]
    assert KINDS["runpod"] is RUNPOD and RECORDS["runpod"] is RUNPOD_RECORDS


def test_a_target_is_dispatched_on_its_kind():
    assert kind_of(RunpodTarget(name="pod", kind="runpod")) is RUNPOD
    assert is_pod(RunpodTarget(name="pod", kind="runpod"))
    assert not is_pod(LocalTarget(name="here", kind="local")) and not is_pod(SshTarget(name="box", kind="ssh"))
    with pytest.raises(ConfigError, match="^target `odd` has an unknown kind$"):
        kind_of(LocalTarget(name="odd", kind="mainframe"))
