import random

import pytest

from overbrainer.dataset.dedup import LexicalDedup, filter_all_pairs, jaccard, shingles


def test_shingles_fold_case_and_punctuation():
    assert shingles("What is a borrow?") == shingles("what IS a, borrow")
    assert shingles("What is a borrow?") == {"what is", "is a", "a borrow"}
    assert shingles("Borrowing!") == {"borrowing"}
    assert shingles("?!") == frozenset()
    assert shingles("Ünïcode ÉTÉ") == {"ünïcode été"}


def test_jaccard_edges():
    a = shingles("how do lifetimes work")
    assert jaccard(a, a) == 1.0
    assert jaccard(a, shingles("why use an arena allocator")) == 0.0
    assert jaccard(frozenset(), frozenset()) == 1.0
    assert jaccard(frozenset(), a) == 0.0


def test_spec_example_and_batch_rule():
    d = LexicalDedup(0.8)
    d.seed(["What is a borrow in Rust?"])
    kept, dropped = d.filter(["what is a borrow in rust", "How does the borrow checker handle loops?",
                              "How does the borrow checker handle loops"])
    assert kept == ["How does the borrow checker handle loops?"]
    assert dropped == [("what is a borrow in rust", "What is a borrow in Rust?"),
                       ("How does the borrow checker handle loops",
                        "How does the borrow checker handle loops?")]
    assert d.filter(["How does the borrow checker handle loops?"])[0] == []


def test_check_remembers_nothing_but_compares_within_the_batch():
    d = LexicalDedup(0.8)
    d.seed(["a b c d e"])
    assert d.check(["x y z", "x y z!", "a b c d e"]) == [None, "x y z", "a b c d e"]
    assert len(d) == 1
    assert d.check(["x y z"]) == [None]
    d.record(["x y z"])
    assert d.check(["X Y Z"]) == ["x y z"]


def test_empty_and_single_word_texts():
    d = LexicalDedup(0.9)
    kept, dropped = d.filter(["???", "rust", "!!!", "Rust.", "rust borrow"])
    assert kept == ["???", "rust", "rust borrow"]
    assert dropped == [("!!!", "???"), ("Rust.", "rust")]


@pytest.mark.parametrize("threshold", [0.0, -1.0])
def test_threshold_at_or_below_zero_keeps_only_the_first(threshold):
    d = LexicalDedup(threshold)
    kept, dropped = d.filter(["one two", "three four", "???"])
    assert kept == ["one two"] and [dup for _, dup in dropped] == ["one two", "one two"]


def test_threshold_above_one_keeps_everything():
    d = LexicalDedup(1.01)
    assert d.filter(["a b", "a b", "?", "?"])[0] == ["a b", "a b", "?", "?"]


VOCAB = "what how why is are the a borrow checker rust lifetime move copy trait async loop when does".split()


def random_text(rng):
    n = rng.choice([0, 1, 1, 2, 3, 4, 5, 6, 8])
    words = [rng.choice(VOCAB[: rng.choice([4, 8, len(VOCAB)])]) for _ in range(n)]
    return " ".join(words) + rng.choice(["", "?", "!", " ..."])


def expected_dups(batch, kept, dropped):
    """Per candidate: None when the all-pairs rule kept it, else the text it duplicated."""
    kept, dropped = iter(kept), iter(dropped)
    next_kept = next(kept, None)
    out = []
    for text in batch:
        if text == next_kept:
            out.append(None)
            next_kept = next(kept, None)
        else:
            out.append(next(dropped)[1])
    return out


@pytest.mark.parametrize("seed", range(12))
def test_identical_to_the_all_pairs_rule_on_random_texts(seed):
    rng = random.Random(seed)
    threshold = rng.choice([0.3, 0.5, 0.6, 0.75, 0.8, 0.9, 1.0, rng.random()])
    memory = [random_text(rng) for _ in range(rng.randint(0, 150))]
    d = LexicalDedup(threshold)
    d.seed(memory)
    everything = list(memory)
    for _ in range(8):
        batch = [random_text(rng) for _ in range(rng.randint(1, 40))]
        expected = filter_all_pairs(everything, batch, threshold)
        size = len(d)
        assert d.check(batch) == expected_dups(batch, *expected)  # the same answer, nothing remembered
        assert len(d) == size
        assert d.filter(batch) == expected  # kept texts and which text each dropped one duplicated
        everything.extend(expected[0])


def test_index_rebuilds_keep_results_exact():
    rng = random.Random(7)
    texts = [" ".join(rng.choice(VOCAB) for _ in range(rng.randint(3, 9))) for _ in range(1500)]
    d = LexicalDedup(0.6)
    assert d.filter(texts) == filter_all_pairs([], texts, 0.6)
