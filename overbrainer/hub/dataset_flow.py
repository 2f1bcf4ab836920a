"""`push --dataset`: the project's train/eval split to a Hugging Face Hub dataset repo, as
Parquet, with a dataset card, in one commit.

`dataset_push_flow(session, *, repo, public, overwrite_card, dry_run)`: data/train.jsonl
and data/eval.jsonl must exist (else exit 2: run `split`) → token and whoami (as `push`; a dry run
needs neither) → repo (`--repo`, else `[hub] dataset_repo`, else the model repo's name + `-data`:
`[hub] repo-data` or `<whoami>/<project name>-data`) → the Parquet files written to
`.overbrainer/dataset/hub/data/` (hub.parquet; a split without examples is left out, train must
have some) → card (hub.dataset_card) →
`--dry-run` lists the files and writes the card to `.overbrainer/dataset/hub/README.md`; otherwise
the push (hub.flow.send), resumable like a run's (`.overbrainer/dataset/hub/push.json`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from overbrainer import __version__
from overbrainer.dataset.jsonl import iter_lines
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import OverbrainerError, UsageError
from overbrainer.front.session import Session
from overbrainer.hub import client, push
from overbrainer.hub.dataset_card import gather, render
from overbrainer.hub.files import Upload
from overbrainer.hub.flow import YOU, dry_run_report, hub_token, pick_repo, push_line, send
from overbrainer.hub.parquet import SplitFile, write_split
from overbrainer.support import fmt

log = logging.getLogger(__name__)

SPLITS = ("train", "eval")
LABEL = "dataset"  # the progress events' run_id
NO_EXAMPLE = "data/train.jsonl holds no example: nothing to push"


def repo_path(split: str) -> str:
    """Where a split's one Parquet file goes in the repo (the layout `datasets` pushes)."""
    return f"data/{split}-00000-of-00001.parquet"


def dataset_repo(option: str | None, config: Any, who: str) -> str:
    if option:
        return pick_repo(option, config, who)
    return config.hub.dataset_repo or pick_repo(None, config, who) + "-data"


def check_split(paths: ProjectPaths) -> dict[str, Path]:
    """The split's files; UsageError (exit 2) naming the one missing, OverbrainerError when train
    holds no example (read up to its first line that is not blank)."""
    sources = {"train": paths.train, "eval": paths.eval}
    for name, path in sources.items():
        if not path.is_file():
            raise UsageError(f"data/{name}.jsonl is missing: run `overbrainer split` (or `run`) first, "
                             f"then push the dataset")
    if not any(raw.strip() for _, _, raw in iter_lines(paths.train)):
        raise OverbrainerError(NO_EXAMPLE)
    return sources


def stage(paths: ProjectPaths, sources: dict[str, Path]) -> tuple[list[Upload], dict[str, SplitFile]]:
    """Each split written as Parquet under `.overbrainer/dataset/hub/`; the uploads (a split
    without examples has none) and what each file holds."""
    folder = paths.dataset_push / "hub"
    uploads, written = [], {}
    for split, source in sources.items():
        local = folder / repo_path(split)
        written[split] = write_split(source, local)
        if written[split].rows:
            uploads.append(Upload(repo_path(split), local, written[split].size))
        else:
            local.unlink()
    if not written["train"].rows:
        raise OverbrainerError(NO_EXAMPLE)
    return uploads, written


def dataset_push_flow(session: Session, *, repo: str | None = None, public: bool = False,
                      overwrite_card: bool = False, dry_run: bool = False) -> dict:
    """Push the project's split; returns the result dict (also reported through the session)."""
    config = session.config
    paths = ProjectPaths(session.project_dir)
    sources = check_split(paths)
    private = not public and config.hub.private
    token = hub_token(config, dry_run)
    api = None if dry_run else client.api(config.hub.url, token)
    who = YOU if api is None else push.whoami(api, client.host_of(config.hub.url))  # before the writing
    name = dataset_repo(repo, config, who)
    uploads, written = stage(paths, sources)
    size = sum(u.size for u in uploads)
    head = {"dataset": {split: written[split].rows for split in SPLITS}}
    files = {split: repo_path(split) for split in SPLITS if written[split].rows}

    def card(name: str) -> str:
        return render(gather(config, paths.root, name, __version__, written["train"], written["eval"], files))

    if api is None:
        return dry_run_report(session, paths.dataset_push, uploads, name, private, card(name), head)
    target = push.Target(name, private, public, repo_type="dataset")
    log.info("push: dataset %s as %s, %d files (%s)", target.repo, who, len(uploads), fmt.size(size))
    data = send(session, api, target, uploads, card, paths.dataset_push, LABEL,
                overwrite_card=overwrite_card, message=f"Upload dataset with overbrainer {__version__}")
    result = {**head, **data}
    session.report(push_line(data), result)
    return result
