"""Interrupt and Flag with real SIGINTs and SIGTERMs sent to this process (as Ctrl-C, a timeout or
`docker stop` do)."""

import gc
import os
import signal
import threading
import time

import pytest

from overbrainer.errors import Interrupted
from overbrainer.support import stop_signals
from overbrainer.front import interrupt as interrupt_module
from overbrainer.front.interrupt import Flag, Interrupt

LIMIT = 10


def ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)


@pytest.fixture(autouse=True)
def original_handler():
    """Python's own Ctrl-C handler for the test, even when the suite was started with SIGINT
    ignored (`trap '' INT`, a background job of a script, nohup): then Python installs none."""
    started = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    term = signal.getsignal(signal.SIGTERM)
    try:
        yield signal.default_int_handler
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, \
            "a test left its SIGINT handler installed"
        assert signal.getsignal(signal.SIGTERM) is term, "a test left its SIGTERM handler installed"
    finally:
        signal.signal(signal.SIGINT, started)
        signal.signal(signal.SIGTERM, term)


def test_ctrl_c_never_stops_a_shielded_flow_and_stops_a_raced_one():
    interrupt = Interrupt()
    try:
        assert interrupt.state == "listening"

        def shielded():
            ctrl_c()
            assert interrupt.event.wait(LIMIT)
            return "ended"

        assert interrupt.shield(shielded) == "ended"
        assert interrupt.caught() and interrupt.state == "caught"
        started = []
        assert interrupt.race(started.append, 1) is None
        assert started == [], "once Ctrl-C came, a race does not even start its flow"
    finally:
        interrupt.restore()

    interrupt = Interrupt()
    release = threading.Event()
    try:
        def raced():
            ctrl_c()
            release.wait(60)
            return "late"

        t0 = time.monotonic()
        assert interrupt.race(raced) is None
        assert time.monotonic() - t0 < LIMIT
        assert interrupt.caught()
        with pytest.raises(Interrupted, match="stopped here"):
            interrupt.check("stopped here")
    finally:
        release.set()
        interrupt.restore()


def test_race_returns_the_result_or_the_error_of_a_flow_that_ends():
    with Interrupt() as interrupt:
        assert interrupt.race(lambda a, b=0: a + b, 1, b=2) == 3
        with pytest.raises(ValueError, match="bad"):
            interrupt.race(lambda: (_ for _ in ()).throw(ValueError("bad")))
        interrupt.check()
        assert not interrupt.caught()


def _finishing(caplog, note):
    return [r for r in caplog.records if r.getMessage() == f"interrupted: finishing {note} first"]


def test_shield_says_what_it_finishes(caplog):
    caplog.set_level("WARNING", logger="overbrainer")
    with Interrupt() as interrupt:
        def flow():
            ctrl_c()
            assert interrupt.event.wait(LIMIT)
            return 1

        assert interrupt.shield(flow, note="starting the run") == 1
    assert len(_finishing(caplog, "starting the run")) == 1


def test_a_shield_that_ends_right_after_the_signal_still_says_what_it_finished(caplog):
    """The note is taken when the signal comes, not when the watcher thread gets to it, and the
    warning is out before the shield returns."""
    caplog.set_level("WARNING", logger="overbrainer")
    with Interrupt() as interrupt:
        assert interrupt.shield(ctrl_c, note="deleting the pod") is None
        assert len(_finishing(caplog, "deleting the pod")) == 1
        assert interrupt.shield(ctrl_c, note="a second thing") is None
        assert interrupt.caught()
    assert _finishing(caplog, "a second thing") == [], "only the first signal says what finishes"


def test_sigterm_is_caught_like_ctrl_c_and_remembered(original_handler, caplog):
    caplog.set_level("WARNING", logger="overbrainer")
    stop_signals.forget()
    before = signal.getsignal(signal.SIGTERM)
    with Interrupt() as interrupt:
        assert signal.getsignal(signal.SIGTERM) is not before

        def flow():
            os.kill(os.getpid(), signal.SIGTERM)
            assert interrupt.event.wait(LIMIT)
            return "saved"

        assert interrupt.shield(flow, note="saving") == "saved"
        assert interrupt.race(lambda: 1) is None
        assert interrupt.signum == signal.SIGTERM and stop_signals.first() == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before
    assert len(_finishing(caplog, "saving")) == 1


def _delivered(signum):
    """Send `signum` to this process and let its Python handler run (the kernel coalesces a
    signal still pending with the next one of its kind: this one is not)."""
    os.kill(os.getpid(), signum)
    time.sleep(0.05)


def test_the_same_signal_again_within_a_second_is_one_stop_a_later_one_abandons(monkeypatch):
    """GNU `timeout` sends its SIGTERM to the command, then to the command's process group (the
    command again): that is one stop. Only a separate, later interrupt abandons the requests in
    flight (REPEAT made short here)."""
    monkeypatch.setattr(stop_signals, "REPEAT", 0.4)
    stop_signals.forget()
    term = signal.getsignal(signal.SIGTERM)
    try:
        with Interrupt() as interrupt:
            _delivered(signal.SIGTERM)
            _delivered(signal.SIGTERM)  # to the group: the same stop
            assert interrupt.event.wait(LIMIT) and not interrupt.abandon.is_set()
            time.sleep(0.4)
            _delivered(signal.SIGTERM)  # a later one: a second interrupt
            assert interrupt.abandon.wait(LIMIT)
        with Interrupt() as interrupt:  # another signal, even at once, is another interrupt
            stop_signals.forget()
            _delivered(signal.SIGINT)
            _delivered(signal.SIGTERM)
            assert interrupt.abandon.wait(LIMIT)
    finally:
        signal.signal(signal.SIGTERM, term)
        stop_signals.forget()


def test_a_repeat_after_the_interrupt_ended_raises_nothing(monkeypatch):
    """The stop's second copy may come once the stage's Interrupt is gone (its summary printed):
    the command line's handler (cli/stops.py) takes it for the same stop, so it cannot break off
    what the first one started; a later one raises KeyboardInterrupt as Ctrl-C does."""
    from overbrainer.cli import stops

    monkeypatch.setattr(stop_signals, "REPEAT", 0.4)
    stop_signals.forget()
    term = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, stops._on_stop_signal)
    try:
        with Interrupt() as interrupt:
            _delivered(signal.SIGTERM)
            assert interrupt.event.wait(LIMIT)
        _delivered(signal.SIGTERM)  # the same stop, delivered again: nothing raised
        time.sleep(0.4)
        with pytest.raises(KeyboardInterrupt):
            _delivered(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, term)
        stop_signals.forget()


def test_ctrl_c_ignored_before_an_interrupt_is_ignored_again_after_it():
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        interrupt = Interrupt()
        ctrl_c()
        assert interrupt.event.wait(LIMIT), "while it lives, the Interrupt hears Ctrl-C"
        interrupt.restore()
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
        ctrl_c()  # ignored: no KeyboardInterrupt
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def test_wait_returns_early_on_ctrl_c():
    with Interrupt() as interrupt:
        assert interrupt.wait(0.01) is False
        threading.Thread(target=ctrl_c).start()
        t0 = time.monotonic()
        assert interrupt.wait(LIMIT) is True
        assert time.monotonic() - t0 < LIMIT
        assert interrupt.wait(LIMIT) is True


def test_restore_puts_the_old_handler_back_and_ctrl_c_behaves_as_usual(original_handler):
    interrupt = Interrupt()
    assert signal.getsignal(signal.SIGINT) is not original_handler
    interrupt.restore()
    interrupt.restore()  # twice is fine
    assert signal.getsignal(signal.SIGINT) is original_handler
    with pytest.raises(KeyboardInterrupt):
        ctrl_c()
        threading.Event().wait(LIMIT)


def test_nested_interrupts_both_hear_ctrl_c_and_restore_in_any_order(original_handler):
    outer = Interrupt()
    inner = Interrupt()
    try:
        ctrl_c()
        assert inner.event.wait(LIMIT) and outer.event.wait(LIMIT)
        outer.restore()  # out of order: inner's handler stays installed
        assert signal.getsignal(signal.SIGINT) is not original_handler
        second = Interrupt()
        ctrl_c()
        assert second.event.wait(LIMIT)
        second.restore()
    finally:
        inner.restore()
        outer.restore()
    assert signal.getsignal(signal.SIGINT) is original_handler


def test_outside_the_main_thread_it_is_off_and_race_runs_inline():
    box = {}

    def worker():
        interrupt = Interrupt()
        box["state"] = interrupt.state
        box["thread"] = interrupt.race(threading.get_ident)
        box["me"] = threading.get_ident()
        box["wait"] = interrupt.wait(0)
        interrupt.restore()

    t = threading.Thread(target=worker)
    t.start()
    t.join(LIMIT)
    assert box == {"state": "off", "thread": box["me"], "me": box["me"], "wait": False}
    off = Interrupt.off()
    assert off.state == "off" and off.race(lambda: 5) == 5 and off.shield(lambda: 6) == 6


def test_a_detach_event_never_stops_a_shielded_flow_and_stops_a_raced_one():
    detach = threading.Event()
    interrupt = Interrupt.on(detach)
    assert interrupt.state == "listening"

    def shielded():
        detach.set()
        return "ended"

    assert interrupt.shield(shielded) == "ended"
    assert interrupt.caught()
    assert interrupt.race(lambda: 1) is None

    detach = threading.Event()
    interrupt = Interrupt.on(detach)
    release = threading.Event()
    try:
        t0 = time.monotonic()
        assert interrupt.race(lambda: (detach.set(), release.wait(60))) is None
        assert time.monotonic() - t0 < LIMIT
        assert interrupt.event is detach and interrupt.wait(LIMIT)
    finally:
        release.set()
    interrupt.restore()  # nothing installed: a no-op


def test_a_cli_provisioning_flag_starts_clear_and_is_set_by_ctrl_c():
    before = signal.getsignal(signal.SIGINT)
    flag = Flag.catching()
    try:
        assert not flag.is_set() and signal.getsignal(signal.SIGINT) is not before  # watching Ctrl-C
        ctrl_c()
        assert flag.event.wait(LIMIT)
        assert flag.is_set() and flag.interrupted
    finally:
        flag.close()
    assert signal.getsignal(signal.SIGINT) is before  # no longer watching


def test_a_cli_flag_dropped_without_close_stops_catching(original_handler):
    flag = Flag.catching()
    assert signal.getsignal(signal.SIGINT) is not original_handler
    del flag
    gc.collect()
    assert signal.getsignal(signal.SIGINT) is original_handler


def test_an_embedded_flag_reads_the_abandon_event():
    abandon = threading.Event()
    with Flag(abandon) as flag:
        assert not flag.is_set()
        abandon.set()
        assert flag.is_set()


def test_ctrl_c_from_outside_the_process_stops_a_race_and_the_process_ends_cleanly():
    import subprocess
    import sys

    code = (
        "import threading\n"
        "from overbrainer.front.frontend import Cli\n"
        "with Cli().interrupt() as interrupt:\n"
        "    def flow():\n"
        "        print('ready', flush=True)\n"
        "        threading.Event().wait(60)\n"
        "    print(interrupt.race(flow), interrupt.caught(), flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=LIMIT)
    finally:
        proc.kill()
    assert (proc.returncode, out, err) == (0, "None True\n", "")


def test_sighup_is_caught_like_sigterm_unless_it_was_ignored(original_handler):
    stop_signals.forget()
    before = signal.getsignal(signal.SIGHUP)
    try:
        with Interrupt() as interrupt:
            os.kill(os.getpid(), signal.SIGHUP)  # the terminal closed
            assert interrupt.event.wait(LIMIT) and interrupt.signum == signal.SIGHUP
            assert stop_signals.first() == signal.SIGHUP
        assert signal.getsignal(signal.SIGHUP) is before
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup
        with Interrupt():
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN  # not caught: the kernel drops it
    finally:
        signal.signal(signal.SIGHUP, before)
        stop_signals.forget()


def test_a_race_on_a_signal_event_is_woken_by_it_not_by_polling(monkeypatch):
    """Embedded (`Interrupt.on`) with a support.threads.Signal: setting it ends the race at once,
    with no poll of the event (the poll is made an hour long here)."""
    from overbrainer.support.threads import Signal

    monkeypatch.setattr(interrupt_module, "_EVENT_POLL", 3600.0)
    detach, hung, out = Signal(), threading.Event(), []
    it = Interrupt.on(detach)
    racing = threading.Thread(target=lambda: out.append(it.race(hung.wait)), daemon=True)
    racing.start()
    while not any(t.name == "overbrainer-race" for t in threading.enumerate()):
        time.sleep(0.001)
    detach.set()
    racing.join(10)
    hung.set()
    assert not racing.is_alive() and out == [None]
