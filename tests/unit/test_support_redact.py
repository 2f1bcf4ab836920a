import logging

from overbrainer.front.logs import RedactingFilter
from overbrainer.support.redact import MASK, Redactor, strip_controls


def test_registered_secrets_are_masked_longest_first():
    r = Redactor()
    r.register("sk-abcdefgh")
    r.register("sk-abcdefgh-longer")
    assert r.redact("a sk-abcdefgh-longer b sk-abcdefgh c") == f"a {MASK} b {MASK} c"


def test_placeholder_keys_do_not_mask_ordinary_words():
    r = Redactor()
    r.register("ollama")
    r.register(None)
    r.register("")
    assert r.redact("ollama answered") == "ollama answered"


def test_escape_sequences_and_control_characters_are_stripped_but_tabs_and_newlines_kept():
    assert strip_controls("a\x1b[31mred\x1b[0m\x07\tb\nc\x9b2J") == "ared\tb\nc"


def test_the_log_filter_masks_and_strips():
    from overbrainer.support import redact

    redact.register("tok-1234567890")
    rec = logging.LogRecord("overbrainer", logging.WARNING, __file__, 1, "HTTP 500: %s", ("\x1b]0;x\x07tok-1234567890",),
                            None)
    RedactingFilter().filter(rec)
    assert rec.getMessage() == f"HTTP 500: {MASK}"
