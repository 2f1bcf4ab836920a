import io
import json
import logging
import re
import subprocess
import sys

import pytest

from overbrainer.front.logs import StderrHandler, parse_levels, setup_logging
from overbrainer.support import redact

LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (DEBUG|INFO|WARN|ERROR) (.*)$")


class Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def logs():
    """setup_logging into a buffer; afterwards the process's logging is put back."""
    root = logging.getLogger()
    saved = (root.level, list(root.handlers), logging.getLogger("overbrainer").level)
    streams = []

    def setup(json=False, env=None, stream=None):
        stream = stream if stream is not None else io.StringIO()
        streams.append(stream)
        setup_logging(json, stream=stream, environ=env or {})
        return stream

    yield setup
    for h in list(root.handlers):
        if isinstance(h, StderrHandler):
            root.removeHandler(h)
    root.setLevel(saved[0])
    for h in saved[1]:
        if h not in root.handlers:
            root.addHandler(h)
    logging.getLogger("overbrainer").setLevel(saved[2])
    for name in ("urllib3", "paramiko"):
        logging.getLogger(name).setLevel(logging.NOTSET)
    redact.REDACTOR.clear()


def emitted(stream):
    return [LINE.match(line).groups() for line in stream.getvalue().splitlines() if LINE.match(line)]


def test_lines_are_time_level_message_at_info_by_default(logs):
    out = logs()
    log = logging.getLogger("overbrainer.test")
    log.debug("hidden")
    log.info("answers: 40 to process")
    log.warning("answers: q1: HTTP 429: slow down; retrying in 2.4s")
    log.error("answers: q2 failed: boom")
    assert emitted(out) == [("INFO", "answers: 40 to process"),
                            ("WARN", "answers: q1: HTTP 429: slow down; retrying in 2.4s"),
                            ("ERROR", "answers: q2 failed: boom")]
    assert len(out.getvalue().splitlines()) == 3


def test_overbrainer_log_sets_the_level_and_dependencies_stay_at_warning(logs):
    out = logs(env={"OVERBRAINER_LOG": "debug"})
    logging.getLogger("overbrainer.x").debug("mine")
    logging.getLogger("urllib3.connectionpool").info("theirs")
    logging.getLogger("paramiko.transport").warning("theirs too")
    assert emitted(out) == [("DEBUG", "mine"), ("WARN", "theirs too")]

    for value in ("warn", "WARNING"):
        out = logs(env={"OVERBRAINER_LOG": value})
        logging.getLogger("overbrainer.x").info("no")
        logging.getLogger("overbrainer.x").warning("yes")
        assert emitted(out) == [("WARN", "yes")]

    out = logs(env={"OVERBRAINER_LOG": "error"})
    logging.getLogger("paramiko").warning("no")
    logging.getLogger("overbrainer").error("yes")
    assert emitted(out) == [("ERROR", "yes")]

    out = logs(env={"OVERBRAINER_LOG": "info,urllib3=debug"})
    logging.getLogger("urllib3").debug("asked for")
    assert emitted(out) == [("DEBUG", "asked for")]


def test_an_unknown_level_is_a_warning_and_info_stays():
    assert parse_levels("loud") == (logging.INFO, {}, [
        "OVERBRAINER_LOG: unknown level `loud` (debug|info|warn|error)"])
    assert parse_levels("overbrainer=debug,paramiko::transport=info")[:2] == (
        logging.DEBUG, {"paramiko.transport": logging.INFO})


def test_colour_only_on_a_terminal_and_never_with_no_color(logs):
    tty = logs(stream=Tty())
    logging.getLogger("overbrainer").warning("coloured")
    assert "\x1b[33mWARN\x1b[0m coloured" in tty.getvalue()

    for env, stream in (({"NO_COLOR": "1"}, Tty()), ({}, io.StringIO()), ({"TERM": "dumb"}, Tty())):
        out = logs(env=env, stream=stream)
        logging.getLogger("overbrainer").warning("plain")
        assert "\x1b" not in out.getvalue() and emitted(out) == [("WARN", "plain")]


def test_json_lines_with_json(logs):
    out = logs(json=True, stream=Tty())
    logging.getLogger("overbrainer").info("hello %s", "world")
    obj = json.loads(out.getvalue())
    assert set(obj) == {"event", "time", "level", "message"}
    assert obj["event"] == "log" and obj["level"] == "info" and obj["message"] == "hello world"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", obj["time"])


def test_secrets_are_masked_in_messages_and_tracebacks(logs):
    out = logs(env={"OVERBRAINER_LOG": "debug"})
    redact.register("sk-live-abcdef123456")
    log = logging.getLogger("overbrainer")
    log.info("key is %s", "sk-live-abcdef123456")
    try:
        raise RuntimeError("bad key sk-live-abcdef123456")
    except RuntimeError:
        log.debug("internal error", exc_info=True)
    text = out.getvalue()
    assert "sk-live-abcdef123456" not in text
    assert "key is ***" in text and "RuntimeError: bad key ***" in text


def test_setup_is_idempotent(logs):
    logs()
    out = logs()
    assert sum(isinstance(h, StderrHandler) for h in logging.getLogger().handlers) == 1
    logging.getLogger("overbrainer").info("once")
    assert emitted(out) == [("INFO", "once")]


def test_the_cli_logs_to_stderr_in_the_format():
    code = ("import logging, sys; from overbrainer.front.logs import setup_logging; "
            "setup_logging(False); logging.getLogger('overbrainer.x').info('to stderr'); "
            "print('tqdm' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"})
    assert r.stdout.strip() == "False", "setup_logging imports no tqdm"
    assert LINE.match(r.stderr.strip()).groups() == ("INFO", "to stderr")
