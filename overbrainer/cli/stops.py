"""SIGTERM and SIGHUP handled like Ctrl-C: they raise KeyboardInterrupt (an Interrupt of
front/interrupt.py catches them first), so that a command stopped by one says what resumes and
exits 143 or 129. Installed by every command that runs work (AppContext.start_work), not by
`--help`, `--version` or a plain `config check` (start-up time: `import signal`), which a signal
simply ends (a shell still sees 143 or 129)."""

from __future__ import annotations

_stopped_by: list[int] = []  # SIGTERM or SIGHUP, when one came outside every Interrupt
_installed: list[bool] = []


def _on_stop_signal(signum: int, frame: object) -> None:
    if not _stopped_by:
        _stopped_by.append(signum)
    raise KeyboardInterrupt


def catch_stop_signals() -> None:
    """SIGTERM and SIGHUP raise KeyboardInterrupt, as Ctrl-C does, from now on (once). A signal
    ignored at start (`nohup`) stays ignored."""
    if _installed:
        return
    import signal

    _installed.append(True)
    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            if signal.getsignal(signum) == signal.SIG_DFL:
                signal.signal(signum, _on_stop_signal)
        except (OSError, ValueError):
            pass


def first_stop_signal() -> int | None:
    """The first SIGTERM or SIGHUP that came outside every Interrupt (None: none did)."""
    return _stopped_by[0] if _stopped_by else None
