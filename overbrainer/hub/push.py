"""One push to the Hub: the repo (looked up, else created private unless asked otherwise), the
card decision, every file uploaded, then ONE commit with all of them and the card.

Resumable: large files go up through the LFS protocol before the commit, and the Hub's LFS batch
answer names those it already holds, which are not sent again; `runs/<id>/hub/push.json` says
`uploaded` once every upload is done and `pushed` (with the commit) at the end, each written
atomically. Nothing is committed until every upload is done, so an interrupted push leaves the
repo as it was, and running it again finishes it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from overbrainer import __version__
from overbrainer.errors import Interrupted, OverbrainerError
from overbrainer.hub.card import is_ours
from overbrainer.hub.client import CountedFile, HubError, Progress, explain, host_of
from overbrainer.hub.files import CARD_PATH, Upload
from overbrainer.support.atomic import atomic_write_text
from overbrainer.support.record_file import RecordFile

log = logging.getLogger(__name__)

RECORD = "push.json"
PUSH_JSON = RecordFile("push record")
CANCELLED = "push cancelled: nothing was committed, run it again to resume"


@dataclass
class Target:
    repo: str
    private: bool  # the visibility asked for, applied only when the repo is created
    public_asked: bool  # --public was given
    repo_type: str = "model"  # or "dataset" (push --dataset)


def record_path(run_dir: Path) -> Path:
    return run_dir / "hub" / RECORD


def read_record(run_dir: Path) -> dict | None:
    """push.json's `repo` and `state` (what a resumed push looks at), None when there is none or it
    cannot be read (a push then starts anew: the Hub still says which files it holds)."""
    path = record_path(run_dir)
    try:
        data = PUSH_JSON.read_if_any(path)
        if data is None:
            return None
        f = PUSH_JSON.fields(data, path)
        return {"repo": f.text("repo"), "state": f.text("state")}
    except OverbrainerError as e:
        log.debug("push: %s", e)
        return None


def write_record(run_dir: Path, data: dict) -> None:
    path = record_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    PUSH_JSON.write(path, data)


def write_card_copy(run_dir: Path, card: str) -> Path:
    """The card as it would be pushed, at `runs/<id>/hub/README.md` (what --dry-run shows)."""
    path = run_dir / "hub" / CARD_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, card)
    return path


def whoami(api: Any, host: str) -> str:
    try:
        return api.whoami()["name"]
    except Exception as e:  # noqa: BLE001 - worded by explain()
        raise explain(e, "whoami", host=host) from None


def ensure_repo(api: Any, target: Target, host: str) -> tuple[bool, Any]:
    """(private, repo info or None when just created). Refuses a private push into a public repo."""
    # lazy: huggingface_hub only when a push talks to the Hub (hub/__init__.py)
    from huggingface_hub.errors import RepositoryNotFoundError

    ns = target.repo.split("/", 1)[0]
    try:
        info = api.repo_info(target.repo, repo_type=target.repo_type)
    except RepositoryNotFoundError:
        info = None
    except Exception as e:  # noqa: BLE001
        raise explain(e, "repo lookup", namespace=ns, host=host) from None
    if info is None:
        try:
            api.create_repo(target.repo, repo_type=target.repo_type, private=target.private)
        except Exception as e:  # noqa: BLE001
            raise explain(e, "create", namespace=ns, host=host) from None
        log.info("push: created %s %srepo %s", "private" if target.private else "public",
                 "" if target.repo_type == "model" else target.repo_type + " ", target.repo)
        return target.private, None
    private = bool(info.private)
    if not private and target.private and not target.public_asked:
        raise HubError(f"repo {target.repo} is public and this push is private: "
                       f"pass --public to push into it, or pick another --repo")
    log.info("push: repo %s exists and stays %s", target.repo, "private" if private else "public")
    return private, info


def remote_card(api: Any, repo: str, info: Any, host: str, repo_type: str = "model") -> str | None:
    """The repo's README.md, or None when it has none."""
    names = {s.rfilename for s in (getattr(info, "siblings", None) or [])}
    if CARD_PATH not in names:
        return None
    # lazy: huggingface_hub only when a push talks to the Hub (hub/__init__.py)
    from huggingface_hub import get_session, hf_hub_url, hf_raise_for_status

    url = hf_hub_url(repo, CARD_PATH, repo_type=repo_type, endpoint=api.endpoint)
    try:
        r = get_session().get(url, headers=api._build_hf_headers())
        hf_raise_for_status(r)
    except Exception as e:  # noqa: BLE001
        raise explain(e, "README.md download", namespace=repo.split("/")[0], host=host) from None
    return r.content.decode("utf-8", errors="replace")


def card_decision(existing: str | None, overwrite: bool) -> bool:
    """Whether the card replaces the repo's README.md."""
    if existing is None or overwrite or is_ours(existing):
        return True
    log.warning("push: kept the repo's own README.md (use --overwrite-card to replace it with the model card)")
    return False


def upload_and_commit(api: Any, target: Target, run_id: str, run_dir: Path, uploads: list[Upload],
                      card: str | None, *, private: bool, interrupt: Any,
                      emit: Callable[[int, int], None], now: Callable[[], str], message: str | None = None) -> dict:
    """Upload every file, then one commit (`message`, else `Upload run <id> …`). Returns what push.json
    holds."""
    # lazy: huggingface_hub only when a push talks to the Hub (hub/__init__.py)
    from huggingface_hub import CommitOperationAdd

    host = host_of(api.endpoint)
    ns = target.repo.split("/", 1)[0]
    total = sum(u.size for u in uploads)
    progress = Progress(total, emit)
    files = [CountedFile(u.local, progress) for u in uploads]
    try:
        ops = [CommitOperationAdd(path_in_repo=u.path, path_or_fileobj=f) for u, f in zip(uploads, files)]
        if card is not None:
            ops.append(CommitOperationAdd(path_in_repo=CARD_PATH, path_or_fileobj=card.encode("utf-8")))
        for f in files:
            f.armed = True  # hashing is done: from here on, reads are uploads
        emit(0, total)
        paths = [u.path for u in uploads] + ([CARD_PATH] if card is not None else [])
        earlier = read_record(run_dir)
        if earlier and earlier.get("state") == "uploaded" and earlier.get("repo") == target.repo:
            log.info("push: resuming the push of %s: the Hub is asked which files it holds already", run_id)

        _upload_files(api, target, ops, interrupt, ns=ns, host=host)
        base = {"repo": target.repo, "files": paths, "private": private}
        write_record(run_dir, {**base, "state": "uploaded", "uploaded": now()})
        message = message or f"Upload run {run_id} with overbrainer {__version__}"

        info = _commit(api, target, ops, message, interrupt, ns=ns, host=host)
        progress.finish()
        data = {**base, "state": "pushed", "commit": info.oid, "url": info.commit_url, "pushed": now(),
                "size": total, "card": card is not None}
        write_record(run_dir, data)
        return data
    finally:
        for f in files:
            f.close()


def _upload_files(api: Any, target: Target, ops: list, interrupt: Any, *, ns: str, host: str) -> None:
    """Every file's bytes to the Hub's storage (nothing is in the repository until the commit);
    Interrupted when the user stops it."""
    def upload() -> None:
        # One file at a time, in this (abandonable) thread: the library uploads several files
        # on a pool whose threads would keep the process alive after Ctrl-C.
        for op in ops:
            api.preupload_lfs_files(target.repo, additions=[op], repo_type=target.repo_type, free_memory=False)

    try:
        done = interrupt.race(_call, upload)
    except Exception as e:  # noqa: BLE001
        raise explain(e, "upload", namespace=ns, host=host) from None
    if done is None:
        raise Interrupted(CANCELLED)


def _commit(api: Any, target: Target, ops: list, message: str, interrupt: Any, *, ns: str, host: str) -> Any:
    """The one commit that makes the uploaded files the repository's (shielded from a stop)."""
    repo = target.repo

    def commit() -> Any:
        return api.create_commit(repo, operations=ops, commit_message=message, repo_type=target.repo_type)

    try:
        return interrupt.shield(commit, note=f"the commit to {repo}")
    except Exception as e:  # noqa: BLE001
        err = explain(e, "commit", namespace=ns, host=host)
        if err.status is None:
            err = HubError(f"the commit to {repo} was cut off ({type(_root(e)).__name__}): "
                           f"run it again to finish (uploaded files are not sent again)")
        raise err from None


def _call(fn: Callable[[], Any]) -> bool:
    fn()
    return True


def _root(e: BaseException) -> BaseException:
    while e.__cause__ is not None:
        e = e.__cause__
    return e
