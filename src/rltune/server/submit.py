"""Turn a submitted job config into one the job process can run alone.

Datasets must name uploaded files (``file_id``; ``download_url`` ones are fetched and stored
as files first, ``fetch_url_datasets``) and functions registered entities
(``entity_id``, or a loaded ``instance_id``) of the caller's workspace; they are rewritten to
absolute paths (the file's JSONL, the entity's extracted workspace). Everything else is the
user's ``JobConfig``, validated the same way as YAML. The model must exist on this server, and
the job's lengths must fit its context by the rule the trainer applies
(``rltune.config.lengths``; the trainer logs what it derived); both are checked here, at
submit, not when the job runs, as is
``function_backend`` against the server's Ray cluster (``rltune.server.cluster``).
"""

from __future__ import annotations

import concurrent.futures
from typing import Any, Optional

from rltune.config import JobConfig, load_job_config_text
from rltune.config.datasets import DataSourceType
from rltune.config.lengths import fit_job
from rltune.config.yaml_io import check_depth
from rltune.paths import check_model
from rltune.sdk.errors import ConfigError, NotFoundError
from rltune.server.confine import confine_model, confine_trackers
from rltune.server.context import ServerContext


def parse_config(config: Optional[dict[str, Any]], config_yaml: Optional[str],
                 job_name: Optional[str]) -> JobConfig:
    if (config is None) == (config_yaml is None):
        raise ConfigError("give exactly one of 'config' (a JobConfig object) and 'config_yaml'",
                          where="request body", hint='send {"config": {...}}')
    overrides = {"name": job_name} if job_name else {}
    if config_yaml is not None:
        return load_job_config_text(config_yaml, source="config_yaml", ark=False, **overrides)
    check_depth(config, "config")
    return JobConfig.load_from_dict(dict(config or {}), ark=False, **overrides)


#: Downloads run on their own threads: a slow ``download_url`` (up to the deadline of
#: ``rltune.config.download``) never holds a thread of the pool every other request uses.
DOWNLOAD_THREADS = 4
_downloads: Optional[concurrent.futures.ThreadPoolExecutor] = None


def _download_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _downloads
    if _downloads is None:
        _downloads = concurrent.futures.ThreadPoolExecutor(
            DOWNLOAD_THREADS, thread_name_prefix="rltune-download")
    return _downloads


async def fetch_url_datasets(ctx: ServerContext, workspace: str, job: JobConfig) -> JobConfig:
    """Download ``download_url`` datasets and keep them as files (``file_id`` datasets)."""
    import asyncio
    import functools

    from rltune.config.download import fetch, local_name
    from rltune.server.routes.files import store_file

    fixed = []
    for i, ds in enumerate(job.datasets):
        if ds.data_source_type is DataSourceType.DOWNLOAD_URL:
            where = f"datasets[{i}].download_url"
            body = await asyncio.get_running_loop().run_in_executor(
                _download_pool(), functools.partial(
                    fetch, ds.download_url, where=where, max_bytes=ctx.settings.max_upload_bytes,
                    policy=ctx.settings.address_policy, s3_grants=ctx.settings.s3_grants,
                    workspace=workspace))
            rec = store_file(ctx, workspace, local_name(ds.download_url), body,
                             description=f"downloaded from {ds.download_url}")
            ds = ds.model_copy(update={"data_source_type": DataSourceType.FILE_ID,
                                       "file_id": rec["id"], "download_url": None})
        fixed.append(ds)
    return job.model_copy(update={"datasets": fixed})


def resolve(ctx: ServerContext, workspace: str, job: JobConfig) -> tuple[JobConfig, dict]:
    """(runnable config, facts for the job record: file ids, row counts)."""
    from rltune.config.job_rules import ray_trainer_ranks
    from rltune.server.cluster import place_functions

    backend = place_functions(job.function_backend, ctx.settings.ray_address)  # refused early
    ray_trainer_ranks(job.hyper_parameters, backend)  # nnodes_training > 1 needs the cluster
    data = job.to_dict()
    facts: dict[str, Any] = {"training_file_ids": [], "validation_file_ids": []}
    train_rows = 0
    datasets = []
    for i, ds in enumerate(job.datasets):
        where = f"datasets[{i}]"
        if ds.data_source_type is not DataSourceType.FILE_ID or not ds.file_id:
            raise ConfigError(
                "the dataset has no file_id; the job server trains on uploaded files",
                where=where, hint="upload it first (POST /v1/files, AgenticRL.upload_datasets "
                "or `rltune upload-data`) and set file_id: file-…")
        rec = ctx.store.get("files", ds.file_id, workspace=workspace)
        if rec is None:
            raise NotFoundError(f"no file {ds.file_id!r}", where=f"{where}.file_id",
                                hint="list files: GET /v1/files")
        key = "training_file_ids" if ds.type.value == "training" else "validation_file_ids"
        facts[key].append(ds.file_id)
        if ds.type.value == "training":
            train_rows += int(rec["rows"])
        datasets.append({"type": ds.type.value, "file_name": rec["path"], "file_id": ds.file_id})
    if not facts["training_file_ids"]:
        raise ConfigError("the job has no training dataset", where="datasets",
                          hint="add {type: training, file_id: file-…}")
    job.check_dataset_rows(train_rows, where="datasets")
    functions = []
    for i, (fn, raw) in enumerate(zip(job.functions, data.get("functions", []), strict=True)):
        where = f"functions[{i}] ({fn.name})"
        entity_id = fn.entity_id
        if not entity_id and fn.instance_id:
            inst = ctx.instances.record(workspace, fn.instance_id)
            if inst is None:
                raise NotFoundError(f"no function instance {fn.instance_id!r}",
                                    where=f"{where}.instance_id",
                                    hint="list instances: GET /v1/instances")
            entity_id = inst["entity_id"]
        if not entity_id:
            raise ConfigError("the function has no entity_id", where=where,
                              hint="register it first (AgenticRL.register_functions or "
                                   "`rltune register-functions`) and set entity_id")
        rec = ctx.store.get("functions", entity_id, workspace=workspace)
        if rec is None:
            raise NotFoundError(f"no function {entity_id!r}", where=f"{where}.entity_id",
                                hint="list functions: GET /v1/functions")
        if rec["type"] != fn.type.value:
            raise ConfigError(f"{where} is type {fn.type.value} but {entity_id} is a "
                              f"{rec['type']} function", where=f"{where}.type",
                              hint=f"set type: {rec['type']}")
        entity = ctx.registry.get(entity_id)
        ws = ctx.registry.workspace_of(entity)
        fixed = {**raw, "entity_id": entity_id,
                 "fcmodel": {"zipdir": str(ws), "classpath": entity.classpath}}
        for k in ("instance_id", "instance_url", "instance_token", "instance_status"):
            fixed.pop(k, None)
        functions.append(fixed)
    data.update(datasets=datasets, functions=functions)
    data.pop("workspace_dir", None)
    _published_model(ctx, workspace, data, facts)
    runnable = JobConfig.load_from_dict(data)
    confine_trackers(runnable, ctx.settings.address_policy)
    for what, spec in runnable.model_specs().items():
        # unknown, or a hub id not cached while offline: refused before a job record exists
        source = check_model(spec, ctx.settings.home, what=what, workspace=workspace)
        confine_model(ctx, workspace, what, source)
        if source.kind in ("dir", "named"):  # the job loads exactly what was checked here
            _set_model(data, what, str(source.path))
        if what == "model.name" and source.path is not None:
            fit_job(runnable, source.path)  # refused here what cannot fit; the job fits it
    return JobConfig.load_from_dict(data), facts


def _set_model(data: dict, what: str, path: str) -> None:
    if what == "model.name":
        data["model"] = {**(data.get("model") or {}), "name": path}
    else:
        data[what] = path


def _published_model(ctx: ServerContext, workspace: str, data: dict, facts: dict) -> None:
    """``model: <published name>`` (of this workspace) → the published model's folder."""
    from rltune.server.published import find_model

    name = (data.get("model") or {}).get("name")
    rec = find_model(ctx.store, workspace, name) if name else None
    if rec is not None:
        data["model"] = {**data["model"], "name": rec["path"]}
        facts["published_model"] = name
