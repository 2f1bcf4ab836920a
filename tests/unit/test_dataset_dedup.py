import random

import pytest

from overbrainer.dataset.quality.dedup import LexicalDedup, shingle_hashes
from overbrainer.dataset.quality.textstore import TextStore
from tests.fixtures.oracles import filter_all_pairs, jaccard, shingles


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


# --- the compact index: larger random inputs, edges, memory --------------------------------

WORDS = ("borrow checker lifetime trait closure iterator vector slice string buffer thread mutex "
         "channel future executor reference pointer arena allocator macro module crate enum struct "
         "what how why when is are the a of in does can I use my").split()


def question_like(rng, pool):
    """A text of 0-20 words from a Zipf-ish vocabulary, or a near-copy of an earlier one (a word
    changed, dropped or added, case and punctuation changed), so every threshold sees matches."""
    if pool and rng.random() < 0.4:
        words = rng.choice(pool).split()
        if words:
            i = rng.randrange(len(words))
            words[i:i + rng.choice([0, 1])] = rng.choice([[], [rng.choice(WORDS)]])
        text = " ".join(words)
        return rng.choice([text, text.upper(), text + "?", text.replace(" ", ", ")])
    n = rng.choice([0, 1, 2, 3] + list(range(8, 21)) * 2)
    return " ".join(WORDS[min(int(len(WORDS) ** rng.random()) - 1, len(WORDS) - 1)] for _ in range(n))


@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.5, 0.8, 0.9, 1.0, 1.5])
def test_identical_to_the_all_pairs_rule_on_larger_inputs(threshold):
    rng = random.Random(int(threshold * 100) + 3)
    memory: list[str] = []
    for _ in range(700):  # past several rebuilds of the order (at 64, 128, 256, 512 texts)
        memory.append(question_like(rng, memory))
    batches = [[question_like(rng, memory) for _ in range(rng.randint(1, 30))] for _ in range(20)]
    d = LexicalDedup(threshold)
    d.seed(memory)
    everything = list(memory)
    for i, batch in enumerate(batches):
        expected = filter_all_pairs(everything, batch, threshold)
        if i % 4 == 0:
            assert d.check(batch) == expected_dups(batch, *expected)
        assert d.filter(batch) == expected
        everything.extend(expected[0])
    assert len(d) == len(everything)


def test_edge_texts_empty_single_words_and_unicode():
    texts = ["", "   ", "?!", "Rust", "rust!", "été", "ÉTÉ", "Ünïcode ÉTÉ", "ünïcode été?", "日本語 テキスト",
             "日本語　テキスト", "emoji 🦀 crab", "emoji crab", "lone \ud800 surrogate", "lone surrogate",
             "a", "a b", "b a", "a b a b"]
    for threshold in (0.0, 0.5, 0.8, 1.0, 1.01):
        d = LexicalDedup(threshold)
        assert d.filter(texts) == filter_all_pairs([], texts, threshold)
        assert d.check(texts) == [dup for dup in expected_dups(texts, *filter_all_pairs(texts, texts, threshold))]
    d = LexicalDedup(0.8)
    assert d.filter(["lone \ud800 surrogate", "LONE surrogate"]) == (
        ["lone \ud800 surrogate"], [("LONE surrogate", "lone \ud800 surrogate")])  # named exactly


def test_shingle_hashes_are_xxh3_of_the_shingles():
    import xxhash

    for text in ["What is a borrow?", "Borrowing!", "?!", "Ünïcode ÉTÉ and more words"]:
        assert shingle_hashes(text) == {xxhash.xxh3_64_intdigest(s.encode()) for s in shingles(text)}


def test_check_leaves_memory_unchanged():
    rng = random.Random(5)
    memory = []
    for _ in range(300):
        memory.append(question_like(rng, memory))
    d, twin = LexicalDedup(0.7), LexicalDedup(0.7)
    d.seed(memory)
    twin.seed(memory)
    size, nbytes = len(d), d.nbytes()
    big = [question_like(rng, []) for _ in range(3000)]  # more new postings than the table has buckets
    assert d.check(big).count(None) > 1000
    assert (len(d), d.nbytes()) == (size, nbytes)

    def failing():
        yield from big[:50]
        raise RuntimeError("the caller's iterator fails half-way")

    with pytest.raises(RuntimeError):
        d.check(failing())
    assert (len(d), d.nbytes()) == (size, nbytes)
    batch = big[:200] + memory[:50]
    assert d.filter(batch) == twin.filter(batch)
    assert d.nbytes() == twin.nbytes()


def test_the_named_duplicate_is_the_first_remembered():
    d = LexicalDedup(0.5)
    base = "how does the borrow checker handle loops over a mutable vector"
    d.seed([base + " in rust", "unrelated words about arenas and allocators"])
    d.seed([f"filler text number {i} about something else entirely" for i in range(200)])  # rebuilds
    d.seed([base, base + "?", base.upper()])
    # The identical texts came later: the first remembered one with Jaccard >= 0.5 is named.
    assert d.check([base]) == [base + " in rust"]
    kept, dropped = d.filter([base.lower() + "!", "something new entirely, not seen before at all"])
    assert dropped == [(base.lower() + "!", base + " in rust")]
    assert d.filter(["Something new entirely: not seen before at all"])[1] == [
        ("Something new entirely: not seen before at all", "something new entirely, not seen before at all")]


def test_memory_stays_compact():
    rng = random.Random(9)
    texts = []
    for _ in range(5000):
        texts.append(question_like(rng, texts))
    d = LexicalDedup(0.8)
    d.seed(texts)
    utf8 = sum(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    shingle_count = sum(len(shingle_hashes(t)) for t in texts)
    # texts as UTF-8 + 8 bytes each, 8 bytes a shingle + 8 a text, at most 22 bytes a posting
    assert d.nbytes() <= utf8 + 16 * len(texts) + 8 * shingle_count + 22 * shingle_count + 8192


def test_text_store_round_trips_and_truncates():
    store = TextStore()
    texts = ["", "plain", "ünïcode", "日本語", "lone \ud800 surrogate", "🦀"]
    for text in texts:
        store.append(text)
    assert [store[i] for i in range(len(store))] == texts
    store.truncate(3)
    assert len(store) == 3 and store[2] == "ünïcode"
    with pytest.raises(IndexError):
        store[3]
    store.append("again")
    assert store[3] == "again" and store.nbytes() == len("".join(texts[:3] + ["again"]).encode()) + 4 * 8
    store.truncate(0)
    assert len(store) == 0 and store.nbytes() == 0
