"""Shared pytest set-up: every fixture module of tests/fixtures/ is registered here."""

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
]


def pytest_configure(config):
    """Tests start from an environment without the caller's OVERBRAINER_*, VAULT_* and HF_*
    variables (in-process tests included: they load configurations from os.environ), and with
    the loopback exempt from the caller's proxy."""
    from tests.fixtures.cli import loopback_direct, scrub_environ

    scrub_environ()
    loopback_direct()


def pytest_collection_modifyitems(config, items):
    """Every test that needs sshd carries the `ssh` marker, so `-m "not ssh"` leaves them out."""
    from tests.fixtures.sshd import mark_ssh_tests

    mark_ssh_tests(items)


def pytest_sessionfinish(session, exitstatus):
    """The suite fails when any test left a fake Runpod pod billing (the promise: no pod bills
    unless something is bound to delete it)."""
    from tests.fixtures.runpod import LEFT_BILLING

    if LEFT_BILLING:
        for test, pods in LEFT_BILLING:
            print(f"\nfake Runpod pods left billing by {test}: {', '.join(pods)}")
        session.exitstatus = 1
