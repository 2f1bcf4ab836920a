"""The Session a flow is given: its parts (project, front end, configuration) and the Interrupt of
the flow running, from its front end, with real SIGINTs sent to this process."""

import io
import os
import signal
import threading

import pytest

from overbrainer.front.bus import EventBus
from overbrainer.front.frontend import Cli, Embedded
from overbrainer.front.session import Session

LIMIT = 10


@pytest.fixture(autouse=True)
def original_handler():
    """Python's own Ctrl-C handler for the test (see tests/unit/test_front_interrupt.py)."""
    started = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, started)


def cli_session(tmp_path, config=None):
    return Session(tmp_path, Cli(stdout=io.StringIO(), stderr=io.StringIO()), config)


def test_the_interrupt_of_the_flow_catches_ctrl_c_in_its_block_only(tmp_path, original_handler):
    session = cli_session(tmp_path)
    with pytest.raises(RuntimeError, match="no flow of this session is interruptible now"):
        session.interrupt  # noqa: B018 - the property raises
    with session.interruptible() as interrupt:
        assert session.interrupt is interrupt
        assert signal.getsignal(signal.SIGINT) is not original_handler
        os.kill(os.getpid(), signal.SIGINT)
        assert interrupt.event.wait(LIMIT) and session.interrupt.caught()
    assert signal.getsignal(signal.SIGINT) is original_handler
    with pytest.raises(RuntimeError):
        session.interrupt  # noqa: B018
    with session.interruptible() as again:  # a later flow of the command starts clear
        assert not again.caught()


def test_a_nested_block_has_its_own_interrupt_and_gives_the_outer_one_back(tmp_path, original_handler):
    session = cli_session(tmp_path)
    with session.interruptible() as outer:
        with session.interruptible() as inner:
            assert session.interrupt is inner and inner is not outer
        assert session.interrupt is outer
        assert signal.getsignal(signal.SIGINT) is not original_handler
    assert signal.getsignal(signal.SIGINT) is original_handler


def test_an_error_in_the_block_still_restores_the_handler(tmp_path, original_handler):
    session = cli_session(tmp_path)
    with pytest.raises(ValueError), session.interruptible():
        raise ValueError("the flow failed")
    assert signal.getsignal(signal.SIGINT) is original_handler
    with pytest.raises(RuntimeError):
        session.interrupt  # noqa: B018


def test_an_embedded_session_is_interrupted_by_its_detach_event(tmp_path):
    detach = threading.Event()
    session = Session(tmp_path, Embedded(EventBus(), detach, threading.Event(), lambda r: None))
    with session.interruptible() as interrupt:
        assert not interrupt.caught()
        detach.set()
        assert session.interrupt.caught()


def test_the_configuration_is_the_sessions_and_a_session_without_one_says_so(tmp_path):
    bare = cli_session(tmp_path)
    with pytest.raises(RuntimeError, match="this session has no configuration"):
        bare.config  # noqa: B018
    config = object()  # the session only holds it
    configured = bare.with_config(config)
    assert configured.config is config
    assert (configured.project_dir, configured.front) == (bare.project_dir, bare.front)
    with pytest.raises(RuntimeError):
        bare.config  # noqa: B018 - the first session is unchanged
