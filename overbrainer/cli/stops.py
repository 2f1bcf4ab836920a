"""SIGTERM and SIGHUP handled like Ctrl-C: they raise KeyboardInterrupt (an Interrupt of
front/interrupt.py catches them first), so that a command stopped by one says what resumes and
exits 143 or 129. Installed by every command that runs work (AppContext.start_work), not by
`--help`, `--version` or a plain `config check`, which have nothing to resume: a signal simply
ends them (a shell still sees 143 or 129).

Ctrl-C (SIGINT) gets the same handler while Python's own is in place: the same signal again
within a second is the same stop delivered twice (GNU `timeout`, a CI runner signalling the job's
process group: support/stop_signals.py) and raises nothing, so it cannot break off the cleanup and
the resume line the first one started; a later one raises KeyboardInterrupt again."""

from __future__ import annotations

import signal

from overbrainer.support import stop_signals

_installed: list[bool] = []


def _on_stop_signal(signum: int, frame: object) -> None:
    if stop_signals.note(signum):  # outside every Interrupt; a repeat of the last stop raises nothing
        raise KeyboardInterrupt


def catch_stop_signals() -> None:
    """SIGTERM and SIGHUP raise KeyboardInterrupt, as Ctrl-C does, from now on (once); a repeat
    within a second raises nothing (SIGINT's too). A signal ignored at start (`nohup`) stays
    ignored."""
    if _installed:
        return
    _installed.append(True)
    for signum, usual in ((signal.SIGTERM, signal.SIG_DFL), (signal.SIGHUP, signal.SIG_DFL),
                          (signal.SIGINT, signal.default_int_handler)):
        try:
            if signal.getsignal(signum) == usual:
                signal.signal(signum, _on_stop_signal)
        except (OSError, ValueError):
            pass

