import math

import pytest

from overbrainer.dataset.quality.embed_dedup import CHUNK, EmbeddingDedup
from tests.fixtures.oracles import cosine


class Embedder:
    """Deterministic vectors: texts map to fixed directions; records the chunk sizes asked."""

    def __init__(self, table):
        self.table = table
        self.calls = []

    def __call__(self, texts):
        self.calls.append(len(texts))
        return [self.table.get(t, [1.0, 0.0, 0.0]) for t in texts]


def test_cosine():
    assert cosine([1, 0], [1, 0]) == 1.0
    assert cosine([1, 0], [0, 1]) == 0.0
    assert cosine([0, 0], [1, 1]) == 0.0
    assert math.isclose(cosine([1, 1], [1, 0]), 1 / math.sqrt(2))


def test_duplicates_against_seed_and_earlier_kept_candidates():
    table = {"seed": [1.0, 0.0, 0.0], "near seed": [0.99, 0.1, 0.0], "new": [0.0, 1.0, 0.0],
             "near new": [0.0, 0.98, 0.05], "other": [0.0, 0.0, 1.0], "zero": [0.0, 0.0, 0.0]}
    embed = Embedder(table)
    d = EmbeddingDedup(0.95, embed)
    d.seed(["seed"])
    kept, dropped = d.filter(["near seed", "new", "near new", "other", "zero", "zero"])
    assert kept == ["new", "other", "zero", "zero"]  # a zero vector is never a duplicate (cosine 0)
    assert dropped == [("near seed", "seed"), ("near new", "new")]
    assert len(d) == 5
    assert d.filter(["near new"]) == ([], [("near new", "new")])


def test_threshold_is_inclusive():
    embed = Embedder({"a": [1.0, 0.0], "b": [1.0, 0.0]})
    assert EmbeddingDedup(1.0, embed).filter(["a", "b"]) == (["a"], [("b", "a")])


def test_embeds_in_chunks_of_at_most_256():
    embed = Embedder({})
    d = EmbeddingDedup(2.0, embed)  # nothing is a duplicate
    d.seed([f"s{i}" for i in range(600)])
    assert embed.calls == [CHUNK, CHUNK, 600 - 2 * CHUNK]
    embed.calls.clear()
    assert len(d.filter([f"c{i}" for i in range(300)])[0]) == 300
    assert embed.calls == [256, 44]
    embed.calls.clear()
    assert d.filter([]) == ([], []) and embed.calls == []


def test_a_short_answer_from_the_embedder_is_an_error():
    d = EmbeddingDedup(0.9, lambda texts: [[1.0]])
    with pytest.raises(ValueError, match="1 vectors for 2 texts"):
        d.seed(["a", "b"])


def reference_filter(memory, candidates, table, threshold):
    """The rule with `cosine` over plain lists: every candidate against every remembered vector."""
    known = [(text, table[text]) for text in memory]
    kept, dropped = [], []
    for text in candidates:
        dup = next((other for other, v in known if cosine(table[text], v) >= threshold), None)
        if dup is None:
            kept.append(text)
            known.append((text, table[text]))
        else:
            dropped.append((text, dup))
    return kept, dropped


@pytest.mark.parametrize("threshold", [-1.0, 0.0, 0.5, 0.9, 1.0, 1.5])
def test_identical_to_cosine_on_lists_and_names_the_first_remembered(threshold):
    import random

    rng = random.Random(4)
    base = [[rng.gauss(0, 1) for _ in range(16)] for _ in range(20)]
    table = {}
    for i in range(300):
        v = base[i % 20] if i % 3 else [rng.gauss(0, 1) for _ in range(16)]
        table[f"t{i}"] = [x + rng.gauss(0, 0.1) for x in v] if i % 7 else [0.0] * 16
    texts = list(table)
    d = EmbeddingDedup(threshold, Embedder(table))
    d.seed(texts[:100])
    got = d.filter(texts[100:200]), d.filter(texts[200:])
    kept, dropped = reference_filter(texts[:100], texts[100:200], table, threshold)
    assert got[0] == (kept, dropped)
    assert got[1] == reference_filter(texts[:100] + kept, texts[200:], table, threshold)
    assert len(d) == 100 + len(kept) + len(got[1][0])


def test_vectors_are_held_as_float64_end_to_end():
    d = EmbeddingDedup(2.0, Embedder({}))  # nothing is a duplicate: every text is remembered
    texts = [f"text {i}" for i in range(1000)]
    d.seed(texts)
    # 3 components, a norm and an end offset of 8 bytes each, the text as UTF-8 and its end
    assert d.nbytes() == 1000 * (3 + 2) * 8 + sum(len(t) + 8 for t in texts)
    assert d.filter(["ünïcode \ud800"]) == (["ünïcode \ud800"], [])
