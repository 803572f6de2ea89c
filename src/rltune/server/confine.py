"""What a tenant's job config may point at on this server: models and tracker stores.

- ``model`` (and ``teacher_model``): a path under ``$RLTUNE_HOME`` must be one of the server's
  demo models (``<home>/models``), a model published in the caller's workspace
  (``<home>/published/<workspace>``) or a checkpoint of one of the caller's own jobs. Anything
  else there (another workspace's published weights or job checkpoints, the server's files)
  answers 404 as if it did not exist. A directory outside ``$RLTUNE_HOME`` is the operator's
  business (docs/security.md).
- Tracker ``dir``: a relative path inside the job folder (the job runs there), no ``..``,
  ``~`` or absolute path.
- MLflow ``uri``: ``http(s)://`` (an address the download rule allows, reachable within a few
  seconds: checked here, before the job exists) or ``sqlite:///<relative path>`` (a store in
  the job folder).

Example:
    >>> confine_tracker_dir("tb/run1", "observability.trackers[0].dir")
    >>> try:
    ...     confine_tracker_dir("../../server", "dir")
    ... except ConfigError as exc:
    ...     print(exc.message)
    dir '../../server' leaves the job folder
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any, Optional
from urllib.parse import urlsplit

from rltune.config.netguard import AddressPolicy, probe_tcp
from rltune.paths import ModelSource, models_home, rltune_home
from rltune.sdk.errors import ConfigError, NotFoundError

#: Seconds an MLflow server gets to accept a connection at submit.
TRACKER_PROBE_TIMEOUT_S = 3.0


def confine_model(ctx: Any, workspace: str, what: str, source: ModelSource) -> None:
    """Refuse a model path under ``$RLTUNE_HOME`` that is not the caller's (404)."""
    if source.path is None or source.kind == "hub":
        return
    home = rltune_home(ctx.settings.home).resolve()
    path = Path(source.path).resolve()
    if not path.is_relative_to(home):
        return
    allowed = [models_home(home), home / "published" / workspace]
    if any(path.is_relative_to(a.resolve()) for a in allowed):
        return
    jobs = Path(ctx.settings.jobs_dir).resolve()
    if path.is_relative_to(jobs) and path != jobs:
        job_id = path.relative_to(jobs).parts[0]
        if ctx.store.get("jobs", job_id, workspace=workspace) is not None:
            return
    raise NotFoundError(
        f"no model {source.spec!r} in this workspace",
        where=what, hint="use a model published in this workspace (GET /v1/models), a demo "
        "size, a hub id, or a model directory of this server outside its state folder")


def confine_tracker_dir(value: str, where: str) -> None:
    """A tracker's ``dir``: relative, inside the job folder."""
    text = str(value).strip()
    parts = PurePosixPath(text.replace("\\", "/")).parts
    if not text or text.startswith("~") or PurePosixPath(text).is_absolute() or "\0" in text:
        raise ConfigError(f"{where} {value!r} is not a folder inside the job folder",
                          where=where, hint="use a relative path such as 'tensorboard', or "
                          "leave it unset (a folder in the job directory)")
    if ".." in parts:
        raise ConfigError(f"{where} {value!r} leaves the job folder", where=where,
                          hint="use a relative path without '..', or leave it unset")


def confine_tracker_uri(value: str, where: str, policy: Optional[AddressPolicy]) -> None:
    """An MLflow ``uri``: http(s) to an allowed, reachable address, or a relative SQLite
    store in the job folder."""
    text = str(value).strip()
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme == "sqlite" and text.lower().startswith("sqlite:///"):
        rel = text[len("sqlite:///"):]
        if rel and not rel.startswith("/"):
            confine_tracker_dir(rel.split("?", 1)[0], where)
            return
    if scheme in ("http", "https") and parts.hostname:
        port = parts.port or (443 if scheme == "https" else 80)
        ip = policy.resolve(parts.hostname, port, where=where) if policy else parts.hostname
        probe_tcp(ip, port, timeout=TRACKER_PROBE_TIMEOUT_S, where=where,
                  what=f"the MLflow server {parts.scheme}://{parts.netloc}")
        return
    raise ConfigError(
        f"{where} {value!r} is not allowed on the job server: use an http(s) MLflow server or "
        "a store in the job folder", where=where,
        hint="uri: https://mlflow.example.com, or sqlite:///mlflow.db (relative: in the job "
        "folder), or leave it unset (a SQLite store in the job folder)")


def confine_trackers(job: Any, policy: Optional[AddressPolicy]) -> None:
    """Check every tracker's ``dir`` and ``uri`` of ``job`` (a JobConfig)."""
    observability = getattr(job, "observability", None)
    for i, tracker in enumerate(getattr(observability, "trackers", None) or []):
        base = f"observability.trackers[{i}]"
        if tracker.dir is not None:
            confine_tracker_dir(tracker.dir, f"{base}.dir")
        if tracker.uri is not None:
            confine_tracker_uri(tracker.uri, f"{base}.uri", policy)
