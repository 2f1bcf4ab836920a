"""A small, dependency-free language check for the gate (`[gate] language`).

Two methods, by the configured code:

- a language written in its own script (ru, uk, bg: Cyrillic; el: Greek; ar, fa: Arabic; he:
  Hebrew; hi: Devanagari; th: Thai; ko: Hangul; zh: Han; ja: Han and kana): the share of the
  answer's letters in that script must be at least one half;
- a language written in Latin letters (en, de, fr, es, it, pt, nl): at least one half of the
  letters are Latin, and among the words that are common stop words of these seven languages,
  the configured language's are the most frequent.

Limits: text with fewer than MIN_LETTERS letters (or, for Latin languages, fewer than
MIN_STOPWORDS stop words) is not judged (kept); code, formulas and quotations in another
language count like prose; closely related languages outside the list (e.g. Catalan, Galician)
are read as the nearest listed one; ja is told from zh only by the kana it uses.
"""

from __future__ import annotations

import unicodedata

MIN_LETTERS = 40
MIN_STOPWORDS = 5
SHARE = 0.5

_STOPWORDS = {
    "en": "the and of to is in that it for with as on are be this by or not an can you which from when",
    "de": "der die das und ist nicht ein eine zu den mit von sich auf für dem des auch es wird werden oder",
    "fr": "le la les et est une des du que pour dans qui pas sur avec au ce sont par il elle ou plus",
    "es": "el la los las y es una que del por para con no se como más pero su al lo está son",
    "it": "il lo la gli le e è una che del della per con non si come più sono di ma anche nel",
    "pt": "o os as e é uma que do da dos das para com não se como mais por são ao",
    "nl": "de het een en is van dat niet op te zijn met voor als ook aan bij worden wordt",
}
_WORDS = {lang: frozenset(text.split()) for lang, text in _STOPWORDS.items()}

# The scripts of the languages written in their own: Unicode name prefixes of their letters.
_SCRIPTS = {
    "ru": ("CYRILLIC",), "uk": ("CYRILLIC",), "bg": ("CYRILLIC",), "el": ("GREEK",),
    "ar": ("ARABIC",), "fa": ("ARABIC",), "he": ("HEBREW",), "hi": ("DEVANAGARI",), "th": ("THAI",),
    "ko": ("HANGUL",), "zh": ("CJK",), "ja": ("CJK", "HIRAGANA", "KATAKANA"),
}
LANGUAGES = tuple(_STOPWORDS) + tuple(_SCRIPTS)


def _script(ch: str) -> str:
    name = unicodedata.name(ch, "")
    return name.split(" ", 1)[0]


def _letters(text: str) -> list[str]:
    return [ch for ch in text if ch.isalpha()]


def language_problem(text: str, language: str) -> str | None:
    """Why `text` does not look written in `language` (one of LANGUAGES), or None (it does, or
    it is too short to tell)."""
    letters = _letters(text)
    if len(letters) < MIN_LETTERS:
        return None
    if language in _SCRIPTS:
        wanted = _SCRIPTS[language]
        inside = sum(1 for ch in letters if _script(ch).startswith(wanted))
        share = inside / len(letters)
        if share < SHARE:
            return f"{share:.0%} of the letters are in the script of {language}"
        if language == "ja" and not any(_script(ch) in ("HIRAGANA", "KATAKANA") for ch in letters):
            return "no kana: not ja"
        return None
    latin = sum(1 for ch in letters if _script(ch) == "LATIN") / len(letters)
    if latin < SHARE:
        return f"{latin:.0%} of the letters are Latin"
    return _stopword_problem(text, language)


def _stopword_problem(text: str, language: str) -> str | None:
    counts = dict.fromkeys(_WORDS, 0)
    for word in text.lower().split():
        word = word.strip(".,;:!?()[]{}\"'«»“”‘’`*_-")
        for lang, words in _WORDS.items():
            if word in words:
                counts[lang] += 1
    if sum(counts.values()) < MIN_STOPWORDS:
        return None
    best = max(counts, key=lambda lang: (counts[lang], lang == language))
    if best == language:
        return None
    return f"looks like {best}, not {language} (stop words: {best} {counts[best]}, {language} {counts[language]})"
