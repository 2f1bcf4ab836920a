"""Shared pytest set-up: every fixture module of tests/fixtures/ is registered here."""

import pytest

pytest_plugins = [
    "tests.fixtures.cli",
    "tests.fixtures.provider",
    "tests.fixtures.vault",
    "tests.fixtures.sshd",
    "tests.fixtures.project",
    "tests.fixtures.axolotl",
    "tests.fixtures.runpod",
    "tests.fixtures.hub",
    "tests.fixtures.llama",
    "tests.fixtures.serve",
]


def pytest_configure(config):
    """Tests start from an environment without the caller's OVERBRAINER_*, VAULT_* and HF_*
    variables (in-process tests included: they load configurations from os.environ), with the
    loopback exempt from the caller's proxy, SIGHUP at its default action even under `nohup`,
    and every llama.cpp the tests start on one thread."""
    from tests.fixtures.cli import default_hangup, loopback_direct, scrub_environ
    from tests.fixtures.llama import one_thread

    scrub_environ()
    default_hangup()
    loopback_direct()
    one_thread()


def pytest_collection_modifyitems(config, items):
    """Every test that needs sshd carries the `ssh` marker, so `-m "not ssh"` leaves them out."""
    from tests.fixtures.sshd import mark_ssh_tests

    mark_ssh_tests(items)


def pytest_sessionfinish(session, exitstatus):
    """The suite fails when any test left a fake Runpod pod billing (the promise: no pod bills
    unless something is bound to delete it). Under pytest-xdist a worker hands its list to the
    controller (`workeroutput`), which gathers them in `pytest_testnodedown` and fails the run."""
    from tests.fixtures.runpod import LEFT_BILLING

    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reports
        workeroutput["left_billing"] = [[test, list(pods)] for test, pods in LEFT_BILLING]
        return
    if LEFT_BILLING:
        for test, pods in LEFT_BILLING:
            print(f"\nfake Runpod pods left billing by {test}: {', '.join(pods)}")
        session.exitstatus = 1


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: a worker ended; keep what it found left billing."""
    from tests.fixtures.runpod import LEFT_BILLING

    for test, pods in getattr(node, "workeroutput", {}).get("left_billing", []):
        LEFT_BILLING.append((test, pods))
