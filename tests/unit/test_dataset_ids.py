import xxhash

from overbrainer.dataset import ids


def test_pinned_subtopic_id():
    assert ids.subtopic_id("ownership", "borrowing") == "d410fa975affdd150daf206922cfd8cc"


def test_case_and_spacing_variants_share_the_id():
    pinned = "d410fa975affdd150daf206922cfd8cc"
    assert ids.subtopic_id("ownership", "Borrowing") == pinned
    assert ids.subtopic_id("ownership", "  borrowing ") == pinned
    assert ids.subtopic_id("ownership", "\tBORROWING\n") == pinned


def test_normalize_splits_on_whitespace_and_control_characters():
    assert ids.normalize("  Hello\n\tWORLD  ") == "hello world"
    assert ids.normalize("a\x00b\x1fc\x7fd\x85e\u00a0f\u3000g") == "a b c d e f g"
    assert ids.normalize("") == ""
    assert ids.normalize(" \x01 ") == ""


def test_id_is_xxh3_128_of_parts_joined_by_unit_separator():
    expected = xxhash.xxh3_128_hexdigest("subtopic\x1fownership\x1fborrowing".encode())
    assert ids.of("subtopic", "ownership", "borrowing") == expected
    assert len(expected) == 32 and expected == expected.lower()
    assert ids.of("ab", "c") != ids.of("a", "bc")


def test_question_id_depends_on_subtopic_and_normalized_text():
    one, two = ids.subtopic_id("t", "one"), ids.subtopic_id("t", "two")
    assert ids.question_id(one, "What is x?") != ids.question_id(two, "What is x?")
    assert ids.question_id(one, "What is  X?") == ids.question_id(one, "what is x?")
    assert ids.question_id(one, "Ça va ?") == ids.of("question", one, "ça va ?")
