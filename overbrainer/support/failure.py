"""Why a request got no usable answer, as an enum: code matches on the member, a message says
its `text`. Apart from support/http.py (which needs requests) so that the errors carrying a kind
load without the HTTP stack."""

from __future__ import annotations

import enum


class FailureKind(enum.Enum):
    """Why a request got no usable answer. Code matches on the member, never on its words:
    `text` is what a message says (`WORDS`). SERVER is an answer with a 5xx status, which the
    LLM clients' circuit breaker counts with the failures to get an answer at all."""

    REFUSED = "refused"
    DNS = "dns"
    TLS = "tls"
    TIMEOUT = "timeout"
    CUT_OFF = "cut_off"
    CONNECT = "connect"  # another failure to connect (a connect timeout, an unreachable network)
    NO_ANSWER = "no_answer"  # the connection closed after the request was written, before any answer
    SERVER = "server"

    @property
    def text(self) -> str:
        return WORDS[self]

    @property
    def connecting(self) -> bool:
        """No connection could be made at all (a dead port, host or certificate)."""
        return self in (FailureKind.REFUSED, FailureKind.DNS, FailureKind.TLS, FailureKind.CONNECT)

    @property
    def sent(self) -> bool:
        """The request may have reached the server and taken effect: it was written, and what
        came back (nothing, part of an answer, a 5xx a gateway may give) does not say whether it
        was applied. A request that creates something billed is never sent again after one of
        these without first finding out (docs/retries.md)."""
        return not self.connecting

    def __str__(self) -> str:
        return self.text


# The words a message uses for each kind.
WORDS = {FailureKind.REFUSED: "connection refused", FailureKind.DNS: "DNS lookup failed",
         FailureKind.TLS: "TLS handshake failed", FailureKind.TIMEOUT: "timed out",
         FailureKind.CUT_OFF: "the answer was cut off", FailureKind.CONNECT: "cannot connect",
         FailureKind.NO_ANSWER: "no answer (the connection closed after the request was sent)",
         FailureKind.SERVER: "server error"}
