"""Files the tool writes follow the umask (0644 typically), appended or rewritten, like files any
other program creates; a file asked to be private (keys) is 0600 from its creation on."""

import os
import stat
from contextlib import contextmanager

from overbrainer.config.init import init_project
from overbrainer.dataset.jsonl import Appender, StagedRewrite, rewrite
from overbrainer.support.atomic import atomic_write_text


@contextmanager
def umask(mask):
    before = os.umask(mask)
    try:
        yield
    finally:
        os.umask(before)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_rewritten_and_appended_files_follow_the_umask(tmp_path):
    for mask, expected in ((0o022, 0o644), (0o002, 0o664), (0o077, 0o600)):
        folder = tmp_path / f"m{mask:o}"
        with umask(mask):
            atomic_write_text(folder / "run.json", "{}\n")
            with Appender(folder / "answers.jsonl") as a:
                a.append({"id": "x"})
            rewrite(folder / "questions.jsonl", [{"id": "q"}])
            staged = StagedRewrite()
            staged.stage(folder / "train.jsonl", [{"id": "t"}])
            staged.commit()
        for name in ("run.json", "answers.jsonl", "questions.jsonl", "train.jsonl"):
            assert mode(folder / name) == expected, (mask, name, oct(mode(folder / name)))


def test_a_rewrite_of_a_private_file_follows_the_umask_and_a_key_stays_private(tmp_path):
    data = tmp_path / "subtopics.jsonl"
    data.write_text("")
    os.chmod(data, 0o600)
    with umask(0o022):
        rewrite(data, [{"id": "s"}])
        atomic_write_text(tmp_path / "id_ed25519", "KEY\n", mode=0o600)
    with umask(0):
        atomic_write_text(tmp_path / "id_ed25519", "KEY2\n", mode=0o600)
    assert mode(data) == 0o644
    assert mode(tmp_path / "id_ed25519") == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["id_ed25519", "subtopics.jsonl"]  # no temp left


def test_init_writes_a_project_that_is_not_private(tmp_path):
    with umask(0o022):
        init_project(tmp_path / "p")
    assert mode(tmp_path / "p" / "overbrainer.toml") == 0o644
    assert mode(tmp_path / "p" / ".env.example") == 0o644
