"""`init`: the generated project loads and passes config check; never overwrites."""

from __future__ import annotations

import re

import pytest

from overbrainer.config import check
from overbrainer.config.init import init_project, project_name
from overbrainer.config.load import load_config
from overbrainer.config.templates import load_templates
from overbrainer.errors import ConfigError, OverbrainerError

LOCAL = {"OVERBRAINER_PROVIDERS__LLM__BASE_URL": "http://127.0.0.1:11434/v1"}


def test_init_writes_a_project_that_loads(tmp_path):
    d = tmp_path / "My Demo-Project"
    r = init_project(d)
    assert r.created == ["overbrainer.toml", ".env.example", "prompts/subtopics.txt", "prompts/questions.txt",
                         "prompts/answer_system.txt", "prompts/judge.txt", "prompts/grader.txt",
                         ".overbrainer/version"]
    assert r.gitignore == "created"
    assert (d / ".overbrainer" / "version").read_text() == "1\n"
    assert (d / ".gitignore").read_text() == ".env\n/data/\n/runs/\n/.overbrainer/\n"
    c = load_config(d, LOCAL)
    assert c.project.name == "my_demo_project"
    assert c.providers["llm"].protocol == "openai" and c.providers["llm"].base_url.startswith("http://127.0.0.1")
    assert c.roles.generator.provider == "llm" and c.training is None and "local" in c.targets
    assert load_config(d, {}).providers["llm"].base_url is None  # loads without any env too
    assert "providers.llm.base_url = http://127.0.0.1:11434/v1" in check.text(c)
    load_templates(d)  # the written prompts compile


def test_every_commented_section_loads_when_uncommented(tmp_path):
    """The template documents real keys: uncomment every `# key = value` line of a section."""
    init_project(tmp_path)
    text = (tmp_path / "overbrainer.toml").read_text()
    out, table = [], ""
    for line in text.splitlines():
        if line.startswith("[") or line.startswith("# ["):
            table = line.lstrip("# ").split()[0]
        # [targets.local] is live and native: its docker-only alternatives stay commented
        if re.match(r"^# (\[|[a-z_]+ = )", line) and table != "[targets.local]":
            out.append(line[2:])
        else:
            out.append(line)
    full = "\n".join(out) + "\n"
    # the template shows two alternatives for some keys: keep the first
    seen: set[tuple[str, str]] = set()
    lines, table = [], ""
    for line in full.splitlines():
        if line.startswith("["):
            table = line
        key = line.split("=")[0].strip() if "=" in line and not line.startswith("#") else None
        if key and (table, key) in seen:
            continue
        if key:
            seen.add((table, key))
        lines.append(line)
    text = "\n".join(lines) + "\n"
    text = re.sub(r'gpu_types = \[[^]]*\]', 'gpu_types = "auto"', text)
    (tmp_path / "overbrainer.toml").write_text(text)
    c = load_config(tmp_path, {**LOCAL, "OVERBRAINER_TARGETS__HOMELAB__HOST": "me@box"})
    assert c.training is not None and c.training.target == "local"
    assert set(c.targets) == {"local", "homelab", "gpu_cloud"}
    assert c.roles.embedder is not None and c.roles.judge is not None
    assert c.warnings == [], "the template sets nothing this version only warns about"
    assert c.metrics.listen == "127.0.0.1:9464" and c.metrics.textfile.endswith(".prom")


def test_gitignore_is_merged(tmp_path):
    (tmp_path / ".gitignore").write_text("node_modules\n/data/")
    r = init_project(tmp_path)
    assert r.gitignore == "updated"
    assert (tmp_path / ".gitignore").read_text() == "node_modules\n/data/\n.env\n/runs/\n/.overbrainer/\n"


def test_gitignore_left_alone_when_complete(tmp_path):
    (tmp_path / ".gitignore").write_text("/.overbrainer/\n.env\n/runs/\n/data/\n")
    assert init_project(tmp_path).gitignore == "unchanged"


@pytest.mark.parametrize("existing", ["overbrainer.toml", ".env.example", "prompts/judge.txt"])
def test_refuses_and_writes_nothing(tmp_path, existing):
    (tmp_path / existing).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / existing).write_text("mine\n")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(ConfigError, match=f"^{tmp_path / existing} already exists: `init` never overwrites"):
        init_project(tmp_path)
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    assert (tmp_path / existing).read_text() == "mine\n"


def test_project_name(tmp_path):
    assert project_name(tmp_path / "Rust Errors") == "rust_errors"
    assert project_name(tmp_path / "---") == "my_project"


def test_a_file_where_a_folder_goes_is_refused_before_anything_is_written(tmp_path):
    (tmp_path / "prompts").write_text("not a folder")
    with pytest.raises(OverbrainerError, match="prompts already exists and is not a directory"):
        init_project(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prompts"]


def test_a_failed_write_takes_back_what_init_wrote(tmp_path, monkeypatch):
    import errno

    from overbrainer.config import init as init_module

    real, calls = init_module.atomic_write_text, []

    def disk_full_on_the_third(path, text):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, text)

    monkeypatch.setattr(init_module, "atomic_write_text", disk_full_on_the_third)
    with pytest.raises(OverbrainerError, match="No space left on device"):
        init_module.init_project(tmp_path)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    monkeypatch.setattr(init_module, "atomic_write_text", real)
    assert (init_module.init_project(tmp_path).project_dir / "overbrainer.toml").is_file()


def test_the_training_block_alone_uncomments_into_a_valid_configuration(tmp_path):
    """What a user does first: delete the `# ` of the [training] block, and nothing else."""
    init_project(tmp_path)
    out, inside = [], False
    for line in (tmp_path / "overbrainer.toml").read_text().splitlines():
        if line.startswith("# [training]"):
            inside = True
        elif inside and not line.startswith("# "):
            inside = False
        out.append(line[2:] if inside else line)
    (tmp_path / "overbrainer.toml").write_text("\n".join(out) + "\n")
    c = load_config(tmp_path, LOCAL)
    assert c.training is not None and c.warnings == []
    assert (c.training.target, c.training.adapter, c.training.base_model) == ("local", "qlora", "Qwen/Qwen3-4B")
    assert c.training.axolotl_extra == {"chat_template": "qwen3"}
    from overbrainer.train.axolotl_config import build_config

    built = build_config(c.training, "/work/run", has_eval=True)
    assert (built["adapter"], built["base_model"], built["chat_template"]) == ("qlora", "Qwen/Qwen3-4B", "qwen3")


def test_the_template_says_what_training_requires_and_what_the_judge_is(tmp_path):
    from overbrainer.config.model import ADAPTERS

    init_project(tmp_path)
    text = (tmp_path / "overbrainer.toml").read_text()
    adapter = next(line for line in text.splitlines() if line.startswith("# adapter = "))
    assert adapter.split("#", 2)[2].strip() == "required: " + " | ".join(ADAPTERS)
    for key in ("target", "base_model"):  # the other keys [training] cannot do without
        assert "# required:" in next(line for line in text.splitlines() if line.startswith(f"# {key} = "))
    judge = next(line for line in text.splitlines() if line.startswith("# judge = "))
    assert "compare" in judge and "default: the parent" in judge and "not in this version" not in judge
