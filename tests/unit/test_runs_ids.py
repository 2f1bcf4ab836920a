import datetime as dt
import os
from pathlib import Path

import pytest

from overbrainer.errors import OverbrainerError
from overbrainer.jobs import ids
from overbrainer.jobs.run_record import RunPlace
from overbrainer.support import fmt

NOW = dt.datetime(2026, 9, 22, 14, 30, 5, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("name,expected", [
    ("Malware Development", "malware_development"),
    ("  --Rust!!  tips--", "rust_tips"),
    ("???", "run"),
    ("", "run"),
    ("Café au lait", "caf_au_lait"),
    ("\u212aelvin", "_elvin".strip("_")),
    ("a" * 50, "a" * 40),
    ("a" * 39 + " b", "a" * 39),
])
def test_slug(name, expected):
    assert ids.slug(name) == expected


def test_base_id_is_utc_to_the_second():
    assert ids.base_id("Malware Development", NOW) == "malware_development_20260922-143005"
    local = NOW.astimezone(dt.timezone(dt.timedelta(hours=5)))
    assert ids.base_id("x", local) == "x_20260922-143005"
    assert fmt.stamp(NOW) == "2026-09-22T14:30:05Z"  # run.json's `created`
    assert ids.side_id("export", NOW) == "export_20260922-143005"


@pytest.mark.parametrize("bad", ["", "..", ".", "a/b", "/abs", "a b", "ü", "a\nb", "a.b"])
def test_invalid_ids_never_reach_a_path(tmp_path, bad):
    with pytest.raises(OverbrainerError, match="is not a valid run ID"):
        RunPlace(tmp_path, bad)


def test_invalid_id_message_strips_control_characters():
    with pytest.raises(OverbrainerError) as e:
        ids.validate("a\x1b[31mb")
    assert "\x1b" not in str(e.value)


def test_legacy_ids_are_valid():
    assert ids.is_valid("20240101-120000-ab12")
    assert RunPlace(Path("/r"), "20240101-120000-ab12").dir == Path("/r/20240101-120000-ab12")


def test_claim_new_takes_the_next_suffix(tmp_path):
    base = ids.base_id("p", NOW)
    first = ids.claim_new(tmp_path, base)
    second = ids.claim_new(tmp_path, base)
    assert first == (base, tmp_path / base)
    assert second[0] == base + "_2"
    assert second[1].is_dir()


def test_claim_new_gives_up_after_99(tmp_path):
    base = "p_20260922-143005"
    for run_id in ids.candidates(base):
        os.mkdir(tmp_path / run_id)
    with pytest.raises(OverbrainerError, match=f"runs {base} to {base}_99 all exist"):
        ids.claim_new(tmp_path, base)


def test_claim_taken_on_the_target_releases_the_local_dir(tmp_path):
    seen = []

    def claim(run_id):
        seen.append(run_id)
        return len(seen) > 2

    run_id, path = ids.claim_new(tmp_path, "p_20260922-143005", claim)
    assert run_id == "p_20260922-143005_3"
    assert seen == ["p_20260922-143005", "p_20260922-143005_2", "p_20260922-143005_3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p_20260922-143005_3"]


def test_claim_error_releases_the_local_dir(tmp_path):
    def claim(run_id):
        raise OverbrainerError("cannot reach target `x`")

    with pytest.raises(OverbrainerError, match="cannot reach"):
        ids.claim_new(tmp_path, "p_20260922-143005", claim)
    assert list(tmp_path.iterdir()) == []
