"""The one exception family of overbrainer. Only the CLI maps these to exit codes."""

from __future__ import annotations

# The exit codes (docs/exit-codes.md): 0 is success.
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_BUSY = 75  # EX_TEMPFAIL (sysexits.h): the project is busy; a cron wrapper may skip quietly
EXIT_NOPERM = 77  # EX_NOPERM (sysexits.h): a person must act (a key, credit, a token); retrying will not help
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM: stopped like Ctrl-C, by a timeout, systemd, docker stop…
EXIT_HANGUP = 129  # 128 + SIGHUP: stopped like Ctrl-C, by a closed terminal or a dropped SSH session


class OverbrainerError(Exception):
    """A failure the user can act on. Exit code 1.

    The message is one line, says what failed and what to do next, and never holds a secret
    value (it is still passed through the redactor before it is printed).
    """

    exit_code = EXIT_FAILURE

    def __init__(self, message: str, *, cause: BaseException | None = None):
        super().__init__(message)
        self.message = message
        if cause is not None:
            self.__cause__ = cause

    def __str__(self) -> str:
        return self.message


class ConfigError(OverbrainerError):
    """Bad configuration or usage: exit code 2. `problems` lists every problem found."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.problems = list(problems or [])

    def __str__(self) -> str:
        if not self.problems:
            return self.message
        return self.message + "".join("\n  " + p for p in self.problems)


class UsageError(ConfigError):
    """A command-line usage error found after parsing (exit code 2)."""


class PersonMustAct(OverbrainerError):
    """A refusal that trying again later will not fix: a key refused or missing, credit or a
    quota spent, a moderation refusal that stops the work, a token refused. Exit code 77
    (`EX_NOPERM` of sysexits.h): a cron wrapper alerts a person instead of retrying. The message
    names what to fix (the variable, the console), never the secret.

    The errors of a domain that mean this (an LLM provider's refused key, Runpod's 402, the
    Hub's refused token) are also of their domain's class: they inherit both."""

    exit_code = EXIT_NOPERM


class Interrupted(OverbrainerError):
    """Ctrl-C (exit code 130), SIGTERM (143) or SIGHUP (129) stopped the command. The message
    says what resumes and how."""

    exit_code = EXIT_INTERRUPTED


class Busy(OverbrainerError):
    """Another overbrainer holds the project (exit code 75, EX_TEMPFAIL: try again later). The
    message names the holder's PID and command."""

    exit_code = EXIT_BUSY


class ItemsFailed(OverbrainerError):
    """Some items of a stage failed; the summary was printed already. Exit code 1."""


class ItemsRefused(ItemsFailed, PersonMustAct):
    """Every item of a stage that failed was refused in a way that running it again cannot change
    (the provider's moderation flagged its prompt): exit code 77, a person must change it."""

