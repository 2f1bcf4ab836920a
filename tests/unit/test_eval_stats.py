"""The numbers of `overbrainer eval`: the primary metric of lm-eval's results, the per-sample
scores, the paired bootstrap of the ratio child / parent, the line; the eval split's token F1."""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

from overbrainer.eval import stats

METRICS = Path(__file__).resolve().parents[2] / "overbrainer" / "eval" / "scripts" / "eval_metrics.py"


def _metrics():
    spec = importlib.util.spec_from_file_location("eval_metrics", METRICS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_primary_metric_is_the_first_numeric_one_of_the_results():
    results = {"name": "gsm8k", "alias": "gsm8k", "sample_len": 3, "exact_match,strict-match": 0.5,
               "exact_match_stderr,strict-match": 0.1, "exact_match,flexible-extract": 0.7}
    assert stats.primary_metric(results) == ("exact_match", "strict-match")
    assert stats.primary_metric({"alias": "x", "acc,none": "N/A"}) is None


def test_sample_scores_keep_the_metrics_filter_only():
    samples = [{"doc_id": 0, "filter": "strict-match", "exact_match": 1.0},
               {"doc_id": 0, "filter": "flexible-extract", "exact_match": 0.0},
               {"doc_id": 1, "filter": "strict-match", "exact_match": True},
               {"doc_id": 2, "filter": "strict-match", "bleu": [["a"], ["b"]]}]
    assert stats.sample_scores(samples, "exact_match", "strict-match") == {0: 1.0, 1: 1.0}


def test_the_ratio_and_its_paired_bootstrap_interval():
    child = {i: float(i % 2) for i in range(40)}  # 20 of 40
    parent = {i: 1.0 if i % 4 else 0.0 for i in range(40)}  # 30 of 40
    out = stats.ratio_interval(child, parent, seed=7, repeats=500)
    assert out["n"] == 40 and out["child"] == 0.5 and out["parent"] == 0.75
    assert abs(out["ratio"] - 2 / 3) < 1e-12
    # The same resamples by hand: Random(seed), n indices with replacement per repeat.
    rng, ratios = random.Random(7), []
    for _ in range(500):
        picks = [rng.randrange(40) for _ in range(40)]
        ratios.append(sum(child[i] for i in picks) / sum(parent[i] for i in picks))
    ratios.sort()
    assert (out["low"], out["high"]) == (ratios[12 - 1], ratios[488 - 1])
    assert out["low"] < out["ratio"] < out["high"]
    assert stats.ratio_interval(child, parent, seed=7, repeats=500) == out  # the seed fixes it


def test_only_documents_both_sides_scored_count_and_a_zero_parent_has_no_ratio():
    out = stats.ratio_interval({0: 1.0, 1: 1.0, 2: 0.0}, {1: 1.0, 2: 1.0, 3: 1.0}, seed=1, repeats=50)
    assert out["n"] == 2 and out["ratio"] == 0.5
    none = stats.ratio_interval({0: 1.0}, {0: 0.0}, seed=1)
    assert none["ratio"] is None and none["low"] is None


def test_the_lines():
    row = {"metric": "acc", "child": 0.41, "parent": 0.5,
           "ratio": {"n": 10, "ratio": 0.82, "low": 0.6, "high": 1.05}}
    assert stats.task_line("mmlu", row) == \
        "mmlu acc: child = 82.0 % of parent (95 % interval 60.0–105.0 %); 0.41 vs 0.5 over 10 samples"
    assert stats.task_line("mmlu", {"metric": "acc", "child": 0.41}) == "mmlu acc: child 0.41 (no parent)"


def test_token_f1_is_squads():
    m = _metrics()
    assert m.token_f1(["The sky is blue."], ["the sky is BLUE"]) == 1.0
    assert abs(m.token_f1(["Two plus two is four"], ["four"]) - 1 / 3) < 1e-12  # P 1, R 1/5
    assert m.token_f1(["hello"], ["goodbye"]) == 0.0
    assert m.token_f1([""], [""]) == 1.0 and m.token_f1(["a"], ["x"]) == 0.0
