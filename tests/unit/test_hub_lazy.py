"""`huggingface_hub` is imported only when a push talks to the Hub, pyarrow only when it writes
Parquet (start-up time)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.fixtures.cli import clean_env

PROBE = """
import sys
from overbrainer.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write("\\nLOADED " + str(sorted(m for m in sys.modules if m.split(".")[0] in ("huggingface_hub", "httpx2", "pyarrow"))))
"""


@pytest.mark.parametrize("args", [["--help"], ["push", "--help"]])
def test_help_does_not_import_huggingface_hub(args):
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=clean_env(),
                       timeout=60)
    assert "Usage:" in r.stdout
    assert r.stderr.strip().splitlines()[-1] == "LOADED []"


def test_the_librarys_shared_client_gets_our_timeouts():
    from huggingface_hub import get_session

    from overbrainer.hub import client

    client.api("http://127.0.0.1:9", None)
    timeout = get_session().timeout
    assert (timeout.connect, timeout.read) == (client.CONNECT_TIMEOUT, client.READ_TIMEOUT) == (10.0, 120.0)
