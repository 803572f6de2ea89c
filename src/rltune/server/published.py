"""Published models in the store: publish a job's checkpoint, find, list, delete, resolve.

A record lives in the ``models`` table under ``mdl:<workspace>:<name>`` (names are unique in a
workspace); its files are in ``rltune.paths.published_dir``. Used by the REST routes, by
the executor's end-of-job hook (``tuned_model_name``) and by job submission (``model: <name>``).
"""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any, Optional

from rltune.lifecycle.publish import (
    check_name,
    describe,
    has_adapter,
    link_model_files,
    pick_checkpoint,
)
from rltune.paths import published_dir
from rltune.sdk.errors import ConflictError, NotFoundError
from rltune.server.jobdata import job_config, list_checkpoints

HINT = "list models: GET /v1/models"


def model_id(workspace: str, name: str) -> str:
    return f"mdl:{workspace}:{name}"


def model_view(rec: dict[str, Any]) -> dict[str, Any]:
    keys = ("name", "source_job", "checkpoint", "step", "validation_reward", "base_model", "kind",
            "lora_rank", "algorithm", "has_adapter", "description", "created_at", "auto")
    return {k: rec.get(k) for k in keys} | {"status": rec["status"]}


def get_model(store: Any, workspace: str, name: str) -> dict[str, Any]:
    rec = store.get("models", model_id(workspace, name), workspace=workspace)
    if rec is None:
        raise NotFoundError(f"no model {name!r}", where=name, hint=HINT)
    return rec


def find_model(store: Any, workspace: str, name: str) -> Optional[dict[str, Any]]:
    return store.get("models", model_id(workspace, name), workspace=workspace)


def publish(store: Any, home: Path, jobs_dir: Path, workspace: str, job: dict[str, Any],
            which: Optional[str | int], name: str, *, description: str = "",
            auto: bool = False) -> dict[str, Any]:
    """Publish checkpoint ``which`` (step, best, last) of ``job`` as ``name``; the record.

    One publish at a time in this server (``_PUBLISHING``): parallel publishes of one name
    give one record and clean 409s."""
    check_name(name)
    with _PUBLISHING:
        return _publish(store, home, jobs_dir, workspace, job, which, name,
                        description=description, auto=auto)


_PUBLISHING = threading.Lock()


def _publish(store: Any, home: Path, jobs_dir: Path, workspace: str, job: dict[str, Any],
             which: Optional[str | int], name: str, *, description: str,
             auto: bool) -> dict[str, Any]:
    job = {**job, "config": job_config(Path(jobs_dir) / job["id"], job)}
    if find_model(store, workspace, name) is not None:
        raise ConflictError(f"model {name!r} exists", where="name",
                            hint="choose another name or delete it: DELETE /v1/models/" + name)
    ckpt = pick_checkpoint(list_checkpoints(Path(jobs_dir) / job["id"]), which)
    target = published_dir(home, workspace, name)
    shutil.rmtree(target, ignore_errors=True)  # leftovers of a deleted record
    link_model_files(Path(ckpt["path"]), target)
    rec = {"id": model_id(workspace, name), "workspace": workspace, "status": "READY",
           "created_at": time.time(), "name": name, "path": str(target),
           "has_adapter": has_adapter(target), "description": description, "auto": auto,
           **describe(job, ckpt)}
    try:
        store.put("models", rec)
    except ConflictError:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return rec


def delete_model(store: Any, workspace: str, name: str) -> None:
    rec = get_model(store, workspace, name)
    # live ones, and those the server will start again (stopped only by a server restart)
    users, _ = store.list("deployments", workspace=workspace,
                          statuses=["STARTING", "RUNNING", "STOPPED"])
    using = [d["id"] for d in users if name in d.get("models", [])
             and (d["status"] != "STOPPED" or d.get("desired") == "running")]
    if using:
        raise ConflictError(f"model {name!r} is served by {', '.join(using)}", where=name,
                            hint=f"stop it first: POST /v1/deployments/{using[0]}/stop")
    store.delete("models", rec["id"])
    shutil.rmtree(rec["path"], ignore_errors=True)


def auto_publish(store: Any, home: Path, jobs_dir: Path, job_id: str) -> Optional[str]:
    """End-of-job hook: publish a SUCCEEDED (or STOPPED) job's best checkpoint (its last when
    nothing was validated; its last always with ``publish_checkpoint: last``) as its
    ``tuned_model_name``. The job record gets ``published_model`` or ``publish_error``; a
    failure here never changes the job's status."""
    job = store.get("jobs", job_id)
    config = job_config(Path(jobs_dir) / job_id, job) if job else {}
    name = config.get("tuned_model_name")
    if not job or not name:
        return None
    which = config.get("publish_checkpoint") or "best"
    try:
        publish(store, home, jobs_dir, job["workspace"], job, which, name, auto=True)
    except Exception as exc:  # reported on the job, never raised into the executor
        store.update("jobs", job_id, publish_error=f"tuned_model_name {name!r}: {exc}")
        return None
    store.update("jobs", job_id, published_model=name)
    return name
