"""SIGTERM and SIGHUP handled like Ctrl-C: they raise KeyboardInterrupt (an Interrupt of
front/interrupt.py catches them first), so that a command stopped by one says what resumes and
exits 143 or 129. Installed by every command that runs work (AppContext.start_work), not by
`--help`, `--version` or a plain `config check`, which have nothing to resume: a signal simply
ends them (a shell still sees 143 or 129)."""

from __future__ import annotations

import signal

from overbrainer.support import stop_signals

_installed: list[bool] = []


def _on_stop_signal(signum: int, frame: object) -> None:
    stop_signals.note(signum)  # outside every Interrupt
    raise KeyboardInterrupt


def catch_stop_signals() -> None:
    """SIGTERM and SIGHUP raise KeyboardInterrupt, as Ctrl-C does, from now on (once). A signal
    ignored at start (`nohup`) stays ignored."""
    if _installed:
        return
    _installed.append(True)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(signum) == signal.SIG_DFL:
                signal.signal(signum, _on_stop_signal)
        except (OSError, ValueError):
            pass

