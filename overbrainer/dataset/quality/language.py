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

import functools
import re

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
# The letters of each script (Unicode blocks), as regular expression classes.
_LATIN = "A-Za-z\u00c0-\u024f\u1e00-\u1eff"
_BLOCKS = {
    "cyrillic": "\u0400-\u052f", "greek": "\u0370-\u03ff\u1f00-\u1fff",
    "arabic": "\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff",
    "hebrew": "\u0590-\u05ff\ufb1d-\ufb4f", "devanagari": "\u0900-\u097f", "thai": "\u0e00-\u0e7f",
    "hangul": "\u1100-\u11ff\u3130-\u318f\uac00-\ud7af",
    "han": "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df",
    "kana": "\u3040-\u30ff",
}
# The languages written in their own script, and its blocks.
_SCRIPTS = {
    "ru": "cyrillic", "uk": "cyrillic", "bg": "cyrillic", "el": "greek", "ar": "arabic", "fa": "arabic",
    "he": "hebrew", "hi": "devanagari", "th": "thai", "ko": "hangul", "zh": "han", "ja": "han kana",
}
LANGUAGES = tuple(_STOPWORDS) + tuple(_SCRIPTS)

# The patterns and the stop word table are built on first use, not at import: `config check`
# imports LANGUAGES only, and compiling the script classes cost it 40M of its 269M instructions
# (scripts/bench_startup.sh --instructions).
_compiled = functools.cache(re.compile)
_NOT_LATIN = f"[^{_LATIN}]+"
_NOT_KANA = f"[^{_BLOCKS['kana']}]+"
_NOT_LETTER = r"[\W\d_]+"
_WORD = r"[^\W\d_]+(?:'[^\W\d_]+)?"


@functools.cache
def _outside(language: str) -> re.Pattern[str]:
    """A run of characters outside the script of `language` (one of _SCRIPTS)."""
    return re.compile("[^" + "".join(_BLOCKS[b] for b in _SCRIPTS[language].split()) + "]+")


@functools.cache
def _langs_of() -> dict[str, tuple[str, ...]]:
    """Per stop word, the languages whose stop word it is (one lookup a word)."""
    out: dict[str, tuple[str, ...]] = {}
    for lang, text in _STOPWORDS.items():
        for word in dict.fromkeys(text.split()):
            out[word] = out.get(word, ()) + (lang,)
    return out


def language_problem(text: str, language: str) -> str | None:
    """Why `text` does not look written in `language` (one of LANGUAGES), or None (it does, or
    it is too short to tell)."""
    letters = _compiled(_NOT_LETTER).sub("", text)
    if len(letters) < MIN_LETTERS:
        return None
    if language in _SCRIPTS:
        share = len(_outside(language).sub("", letters)) / len(letters)
        if share < SHARE:
            return f"{share:.0%} of the letters are in the script of {language}"
        if language == "ja" and not _compiled(_NOT_KANA).sub("", letters):
            return "no kana: not ja"
        return None
    latin = len(_compiled(_NOT_LATIN).sub("", letters)) / len(letters)
    if latin < SHARE:
        return f"{latin:.0%} of the letters are Latin"
    return _stopword_problem(text, language)


def _stopword_problem(text: str, language: str) -> str | None:
    counts = dict.fromkeys(_STOPWORDS, 0)
    langs_of = _langs_of()
    for word in _compiled(_WORD).findall(text.lower()):
        for lang in langs_of.get(word, ()):
            counts[lang] += 1
    if sum(counts.values()) < MIN_STOPWORDS:
        return None
    best = max(counts, key=lambda lang: (counts[lang], lang == language))
    if best == language:
        return None
    return f"looks like {best}, not {language} (stop words: {best} {counts[best]}, {language} {counts[language]})"
