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
]


def pytest_collection_modifyitems(config, items):
    """Every test that needs sshd carries the `ssh` marker, so `-m "not ssh"` leaves them out."""
    from tests.fixtures.sshd import mark_ssh_tests

    mark_ssh_tests(items)
