"""Metrics of the eval split's lm-eval task (`overbrainer eval`), loaded by lm-eval through
`!function eval_metrics.token_f1` from the task's folder; the standard library only.

token_f1: SQuAD's token F1 between the prediction and the reference (the parent's answer): both
lower-cased, punctuation and the articles a/an/the removed, split on whitespace; F1 of the
multiset of tokens they share. Two empty texts score 1, one empty text 0.
"""

import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)


def normalize(text):
    text = _ARTICLES.sub(" ", str(text or "").lower().translate(_PUNCT))
    return text.split()


def f1(prediction, reference):
    pred, ref = normalize(prediction), normalize(reference)
    if not pred or not ref:
        return float(pred == ref)
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def token_f1(references, predictions, **kwargs):
    return f1(predictions[0], references[0])
