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
