"""The `push` flow: a run's model and its card to a Hugging Face Hub repo, in one commit.

`push_flow(session, run_id, *, repo, public, overwrite_card, dry_run)`:
gate and files (hub.files) → token (OVERBRAINER_HF_TOKEN only, never shown) → repo (`--repo`,
else `[hub] repo`, else `<whoami>/<project name>`) → card (hub.card) → `--dry-run` prints what
would be sent and writes the card to `runs/<id>/hub/README.md`, sending nothing; otherwise the
push (hub.push) with upload progress as `Transfer` events. Ctrl-C during the uploads stops with
nothing committed; the commit itself is finished first.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Callable

from overbrainer import __version__
from overbrainer.config.model import Config
from overbrainer.dataset.paths import ProjectPaths
from overbrainer.errors import PersonMustAct, UsageError
from overbrainer.front.events import RunWatched, Transfer
from overbrainer.front.session import Session
from overbrainer.hub import client, push
from overbrainer.hub.card import axolotl_settings, gather, is_hub_id, render
from overbrainer.hub.files import check_run, collect
from overbrainer.hub.push import write_card_copy
from overbrainer.jobs import ids
from overbrainer.jobs.run_record import RunPlace
from overbrainer.support import fmt

log = logging.getLogger(__name__)

REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z")
NO_TOKEN = ("OVERBRAINER_HF_TOKEN is not set: create a write token on Hugging Face and set it in the "
            "environment or .env (or use --dry-run)")
YOU = "<you>"


def repo_name(project_name: str) -> str:
    """The default repo name: the project name as a Hub name (`_` and other signs → `-`)."""
    return ids.slug(project_name).replace("_", "-")


def pick_repo(option: str | None, config: Any, who: str) -> str:
    repo = option or config.hub.repo or f"{who}/{repo_name(config.project.name)}"
    if not REPO.match(repo) and not (who == YOU and repo.startswith(YOU + "/")):
        where = "--repo" if option else "[hub] repo"
        raise UsageError(f"{where} must be exactly NAMESPACE/NAME (got {repo!r})")
    return repo


def hub_token(config: Any, dry_run: bool) -> str | None:
    """OVERBRAINER_HF_TOKEN's value; None for a dry run without it; PersonMustAct (exit 77)
    otherwise."""
    if config.hf_token is None:
        if dry_run:
            return None
        raise PersonMustAct(NO_TOKEN)
    return config.hf_token.resolve()


def _license(api: Any, base_model: str | None) -> str | None:
    """The base model's license from its Hub card (best effort: none on any failure)."""
    if not is_hub_id(base_model):
        return None
    try:
        info = api.model_info(base_model, expand=["cardData"])
        data = info.card_data.to_dict() if info.card_data is not None else {}
    except Exception as e:  # noqa: BLE001 - the card goes without a license row
        log.debug("push: no license for %s (%s)", base_model, type(e).__name__)
        return None
    value = data.get("license")
    return value if isinstance(value, str) and value else None


def _card(config: Any, run_dir: Path, run_id: str, repo: str, paths: list[str], license: str | None) -> str:
    return render(gather(config, run_dir, run_id, repo, paths, __version__, license=license))


def _base_model(run_dir: Path, config: Config) -> str | None:
    base = axolotl_settings(run_dir).get("base_model")
    return base if isinstance(base, str) else (config.training.base_model if config.training else None)


def push_flow(session: Session, run_id: str, *, repo: str | None = None, public: bool = False,
              overwrite_card: bool = False, dry_run: bool = False) -> dict:
    """Push run `run_id`; returns the result dict (also reported through the session)."""
    config = session.config
    place = RunPlace(ProjectPaths(session.project_dir).runs, run_id)
    run_dir = place.dir
    uploads = collect(check_run(place))
    size = sum(u.size for u in uploads)
    private = not public and config.hub.private
    token = hub_token(config, dry_run)
    if dry_run:
        text = _card(config, run_dir, run_id, pick_repo(repo, config, YOU), [u.path for u in uploads], None)
        return dry_run_report(session, run_dir, uploads, pick_repo(repo, config, YOU), private, text,
                              {"run_id": run_id})

    api = client.api(config.hub.url, token)
    who = push.whoami(api, client.host_of(config.hub.url))
    target = push.Target(pick_repo(repo, config, who), private, public)
    log.info("push: %s as %s, %d files (%s)", target.repo, who, len(uploads), fmt.size(size))

    def card(name: str) -> str:
        license = _license(api, _base_model(run_dir, config))
        return _card(config, run_dir, run_id, name, [u.path for u in uploads], license)

    data = send(session, api, target, uploads, card, run_dir, run_id, overwrite_card=overwrite_card)
    result = {"run_id": run_id, **data}
    session.report(push_line(data), result)
    return result


def send(session: Session, api: Any, target: push.Target, uploads: list, card: Callable[[str], str],
         record_dir: Path, label: str, *, overwrite_card: bool, message: str | None = None) -> dict:
    """The repo, the card decision (`card(repo)` renders it, kept in `record_dir/hub/README.md`),
    the uploads with progress as `Transfer` events of `label`, the commit: the result's common part.
    Ctrl-C is caught from the start, and no longer once it returns."""
    host = client.host_of(session.config.hub.url)
    front = session.front
    with session.interruptible() as interrupt:
        private, info = push.ensure_repo(api, target, host)
        existing = push.remote_card(api, target.repo, info, host, target.repo_type) if info is not None else None
        text = None
        if push.card_decision(existing, overwrite_card):
            text = card(target.repo)
            push.write_card_copy(record_dir, text)
        guard = front.open_bus()
        try:
            guard.bus.publish(RunWatched(label, "push"))
            data = push.upload_and_commit(
                api, target, label, record_dir, uploads, text, private=private, interrupt=interrupt,
                emit=lambda done, total: guard.bus.publish(Transfer(label, "upload", done, total)), now=fmt.stamp,
                message=message)
        finally:
            guard.close()
    return {"repo": data["repo"], "commit": data["commit"], "url": data["url"], "files": data["files"],
            "size": data["size"], "private": data["private"], "card": "written" if text is not None else "kept",
            "dry_run": False}


def push_line(data: dict) -> str:
    """`push: <commit url> (N files, SIZE)`."""
    return f"push: {data['url']} ({len(data['files'])} files, {fmt.size(data['size'])})"


def dry_run_report(session: Any, record_dir: Path, uploads: list, repo: str, private: bool, card: str,
                   head: dict) -> dict:
    """What --dry-run prints and reports: the files and their sizes; the card is written to
    `record_dir/hub/README.md`. `head`: the result's first fields (`run_id`, or `dataset`)."""
    card_path = write_card_copy(record_dir, card)
    size = sum(u.size for u in uploads)
    visibility = "private" if private else "public"
    width = max(len(u.path) for u in uploads)
    lines = [f"push: {repo}, {visibility} when created; nothing is sent (--dry-run)"]
    lines += [f"{u.path.ljust(width)}  {fmt.size(u.size)}" for u in uploads]
    rel = card_path.relative_to(session.project_dir).as_posix()
    lines.append(f"push: {len(uploads)} files, {fmt.size(size)}, and the card README.md ({rel})")
    result = {**head, "repo": repo, "private": private, "dry_run": True, "size": size,
              "files": [{"path": u.path, "size": u.size} for u in uploads], "card": rel}
    session.report("\n".join(lines), result)
    return result
