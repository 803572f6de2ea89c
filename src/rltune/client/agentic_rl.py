"""``AgenticRL``: the cloud SDK's client, against a self-hosted rltune server.

Async core (``a``-prefixed methods and the cloud's async ones), thin sync wrappers for the
cloud's sync methods. Config priority: ``AgenticRL(**defaults)`` < YAML (``init``) < call
arguments; a ``hyper_parameters`` or ``resources`` argument **merges** into the YAML's.

Example::

    from rltune import AgenticRL
    client = AgenticRL().init("job.yaml")
    job = await client.run()                        # register, upload, submit
    print(AgenticRL.get(job.output.job_id).output.status)
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any, Optional, TypeVar

from rltune.client import discovery
from rltune.client.http import Transport
from rltune.client.lifecycle import LifecycleMixin
from rltune.client.models import FineTune, FineTuneOutput
from rltune.config import JobConfig, load_job_config
from rltune.config.components import (  # noqa: F401 - importable from here, as in the cloud SDK
    AgenticRLFunctionComponent,
    FunctionComponentModel,
    FunctionComponentRuntime,
    GroupRewardFunctionComponent,
    RewardFunctionComponent,
    RolloutFunctionComponent,
    as_typed_component,
)
from rltune.config.data import as_jsonl
from rltune.config.datasets import DataSourceType, TrainingDataset, ValidationDataset
from rltune.names import JOB_TERMINAL
from rltune.sdk.data import FunctionType
from rltune.sdk.errors import ConfigError, ValidationError

#: A successful submit's ``FineTune.status_code``. The REST call answers 201 Created; the
#: client reports 200 as the cloud SDK does, so its documented ``status_code == 200`` check
#: holds (``FineTune.http_status`` keeps the HTTP code).
SUBMIT_OK = 200

T = TypeVar("T")
TERMINAL = JOB_TERMINAL


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from sync code, also when called inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=target)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


class _either:
    """Callable on the class (default server/key, as the cloud's classmethods) or an instance."""

    def __init__(self, fn: Any):
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, obj: Any, owner: type) -> Any:
        target = obj if obj is not None else None

        def bound(*args: Any, api_key: Optional[str] = None, **kwargs: Any) -> Any:
            client = target or owner(api_key=api_key)
            if api_key and target is not None:
                client = owner(api_key=api_key, base_url=target.base_url)
            kwargs.pop("workspace", None)  # the cloud's header; workspaces come from keys here
            return self.fn(client, *args, **kwargs)

        bound.__doc__ = self.fn.__doc__
        return bound


def _as_list(value: Any) -> list[Any]:
    """``None`` → [], one object → [it], a list → a copy (the cloud accepts all three)."""
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _merge(base: Optional[dict], extra: Optional[dict]) -> dict:
    return {**(base or {}), **(extra or {})}


class AgenticRL(LifecycleMixin):
    """Register functions, upload data, submit and follow jobs on an rltune server."""

    def __init__(self, api_key: Optional[str] = None, base_url: Optional[str] = None,
                 **defaults: Any):
        self.base_url = discovery.base_url(base_url)
        self._api_key = api_key
        self.defaults = defaults
        self.tuning: Optional[JobConfig] = None
        self.config_dir = Path.cwd()
        self.tuning_id: Optional[str] = None

    @property
    def http(self) -> Transport:
        """One transport (one pooled HTTP client) for this client's server and key."""
        key = discovery.api_key(self._api_key, url=self.base_url)
        cached = self.__dict__.get("_transport")
        if cached is None or (cached.base_url, cached.api_key) != (self.base_url.rstrip("/"),
                                                                   key):
            cached = self.__dict__["_transport"] = Transport(self.base_url, key)
        return cached

    # ------------------------------------------------------------------ config
    def init(self, config_path: str | Path | None = None, **kwargs: Any) -> AgenticRL:
        """Load a job YAML; keyword arguments replace its top-level keys."""
        if config_path is None and not (self.defaults or kwargs):
            raise ConfigError("init() needs a config path", where="config_path",
                              hint="AgenticRL().init('job.yaml')")
        if config_path is not None:
            from rltune.config.yaml_io import read_yaml_file

            data = dict(read_yaml_file(config_path).data or {})
            self.config_dir = Path(config_path).resolve().parent
        else:
            data = {}
        for key, value in self.defaults.items():  # __init__ < YAML
            if key == "hyper_parameters":
                training = dict(data.get("training") or {})
                training["hyper_parameters"] = _merge(value, training.get("hyper_parameters"))
                data["training"] = training
            else:
                data.setdefault(key, value)
        if config_path is not None and not self.defaults:
            self.tuning = load_job_config(config_path, **kwargs)
        else:
            self.tuning = JobConfig.load_from_dict(data, **kwargs)
        return self

    def _tuning(self) -> JobConfig:
        if self.tuning is None:
            if self.defaults:
                self.init()
            else:
                raise ConfigError("no job config loaded", where="AgenticRL",
                                  hint="call client.init('job.yaml') first")
        return self.tuning  # type: ignore[return-value]

    # ------------------------------------------------------------------ functions
    async def register_functions(self, functions: Optional[list[Any]] = None,
                                 lazy_load: bool = True) -> tuple[list[str], ...]:
        """Upload and register every function without ``entity_id``; load them unless lazy.

        Returns ``(rollout_entity_ids, reward_entity_ids, group_reward_entity_ids,
        rollout_instance_ids, reward_instance_ids, group_reward_instance_ids)``.
        """
        from rltune.functions.archive import zip_workspace

        comps = ([as_typed_component(f) for f in _as_list(functions)] if functions is not None
                 else self._tuning().functions)
        out: dict[str, list[str]] = {f"{t.value}_{k}": [] for t in FunctionType
                                     for k in ("entities", "instances")}
        for comp in comps:
            if not comp.entity_id:
                fc = comp.fcmodel
                if not fc or not fc.classpath:
                    raise ConfigError(f"function {comp.name!r} has no fcmodel.classpath",
                                      where=f"functions[{comp.name}]",
                                      hint="set fcmodel.classpath or entity_id")
                zipdir = (self.config_dir / (fc.zipdir or ".")).resolve()
                with tempfile.TemporaryDirectory() as tmp:
                    arc = zip_workspace(zipdir, Path(tmp) / "ws.zip")
                    body = arc.path.read_bytes()
                ent = await self.http.request(
                    "POST", "/v1/functions", content=body,
                    params={"classpath": fc.classpath, "type": comp.type.value,
                            "name": comp.name},
                    headers={"Content-Type": "application/zip"})
                comp.entity_id = ent["entity_id"]
            out[f"{comp.type.value}_entities"].append(comp.entity_id)
            if not lazy_load:
                runtime = comp.runtime.model_dump(exclude_none=True) if comp.runtime else None
                inst = await self.http.request(
                    "POST", f"/v1/functions/{comp.entity_id}/load",
                    json={"runtime": runtime, "timeout": comp.timeout})
                comp.instance_id = inst["instance_id"]
                comp.instance_url = inst.get("trigger_url")
                comp.instance_status = 2
                out[f"{comp.type.value}_instances"].append(comp.instance_id)
        order = ("rollout_entities", "reward_entities", "group_reward_entities",
                 "rollout_instances", "reward_instances", "group_reward_instances")
        return tuple(out[k] for k in order)

    @_either
    async def test_functions(self, instance_id: str, functype: Any = None,
                             input_data: Any = None, *, type: Any = None,
                             pull_logs: bool = False, **_: Any) -> dict[str, Any]:
        """Send one input (a dict or a JSON file path) to a loaded instance; the output dict."""
        kind = functype or type
        if isinstance(kind, FunctionType):
            kind = kind.value
        if isinstance(input_data, (str, Path)) and Path(input_data).is_file():
            input_data = json.loads(Path(input_data).read_text(encoding="utf-8"))
        if not isinstance(input_data, dict):
            raise ValidationError("input_data must be a dict or the path of a JSON file",
                                  where="input_data", hint="pass the input JSON object")
        res = await self.http.request("POST", f"/v1/instances/{instance_id}/test",
                                      json={"input": input_data,
                                            "type": str(kind).lower() if kind else None})
        if pull_logs:
            res["logs"] = (await self.http.request(
                "GET", f"/v1/instances/{instance_id}/logs"))["logs"]
        return res

    # ------------------------------------------------------------------ data
    async def upload_datasets(self, datasets: Optional[list[Any]] = None,
                              training_files: Optional[list[str]] = None,
                              validation_files: Optional[list[str]] = None,
                              ) -> tuple[list[str], list[str]]:
        """Upload datasets with a local ``file_name``; returns (training ids, validation ids).

        With file lists the job's datasets are rebuilt from them (a bare string is one file).
        """
        tuning = self.tuning
        if training_files is not None or validation_files is not None:
            as_list = lambda x: [x] if isinstance(x, (str, Path)) else list(x or [])  # noqa: E731
            datasets = ([TrainingDataset(file_name=str(f)) for f in as_list(training_files)]
                        + [ValidationDataset(file_name=str(f)) for f in as_list(validation_files)])
            if tuning is not None:
                tuning.datasets = datasets
        elif datasets is None:
            datasets = self._tuning().datasets
        train, val = [], []
        for ds in datasets:
            if ds.file_name and ds.data_source_type is DataSourceType.FILE_ID:
                path = Path(ds.file_name)
                path = path if path.is_absolute() else (self.config_dir / path)
                if not path.exists():
                    raise ValidationError(f"dataset file {ds.file_name} does not exist",
                                          where=str(path), hint="check datasets[].file_name")
                # JSONL as it is; parquet, JSON and saved `datasets` folders as JSONL rows
                name, body = await asyncio.to_thread(as_jsonl, path)
                rec = await self.http.request(
                    "POST", "/v1/files", content=body,
                    params={"filename": name, "purpose": "fine-tune"},
                    headers={"Content-Type": "application/jsonl"})
                ds.file_id = rec["file_id"]
            if ds.file_id:
                (val if ds.type.value == "validation" else train).append(ds.file_id)
        return train, val

    # ------------------------------------------------------------------ jobs
    def _job_config(self, model: Any = None, datasets: Any = None, functions: Any = None,
                    hyper_parameters: Optional[dict] = None, resources: Optional[dict] = None,
                    job_name: Optional[str] = None, teacher_model: Optional[str] = None,
                    training_file_ids: Optional[list[str]] = None,
                    validation_file_ids: Optional[list[str]] = None) -> dict[str, Any]:
        data = self.tuning.to_dict() if self.tuning is not None else {}
        if self.tuning is None and self.defaults:
            data = self._tuning().to_dict()
        if model is not None:
            data["model"] = {"name": model} if isinstance(model, str) else model
        if teacher_model:
            data["teacher_model"] = teacher_model
        if job_name:
            data["name"] = job_name
        if functions is not None:
            data["functions"] = [as_typed_component(f).model_dump(exclude_none=True)
                                 for f in _as_list(functions)]
        if datasets is not None:
            data["datasets"] = [d if isinstance(d, dict) else d.model_dump(exclude_none=True)
                                for d in datasets]
        if training_file_ids or validation_file_ids:  # the cloud silently dropped these
            data["datasets"] = ([{"type": "training", "file_id": f}
                                 for f in training_file_ids or []]
                                + [{"type": "validation", "file_id": f}
                                   for f in validation_file_ids or []])
        training = dict(data.get("training") or {})
        training["hyper_parameters"] = _merge(training.get("hyper_parameters"), hyper_parameters)
        if resources is not None:
            training["resources"] = _merge(training.get("resources"), resources)
        data["training"] = training
        if "model" not in data:
            raise ConfigError("no model given", where="model",
                              hint="pass model= or init() a YAML with model: {name: ...}")
        return data

    async def asubmit_job(self, **kwargs: Any) -> FineTune:
        """Async core of ``submit_job``."""
        known = ("model", "datasets", "functions", "hyper_parameters", "resources", "job_name",
                 "teacher_model", "training_file_ids", "validation_file_ids")
        unknown = sorted(set(kwargs) - set(known))
        if unknown:
            raise ConfigError(f"unknown submit_job argument(s): {', '.join(unknown)}",
                              where="submit_job", hint=f"use {', '.join(known)}")
        config = self._job_config(**kwargs)
        job = await self.http.request("POST", "/v1/jobs", json={"config": config})
        self.tuning_id = job["job_id"]
        return FineTune.of_submit(job, SUBMIT_OK)

    def submit_job(self, model: Any = None, datasets: Any = None, functions: Any = None,
                   hyper_parameters: Optional[dict] = None, resources: Optional[dict] = None,
                   job_name: Optional[str] = None, teacher_model: Optional[str] = None,
                   **kwargs: Any) -> FineTune:
        """Submit the job (sync; the result may also be awaited)."""
        return run_sync(self.asubmit_job(
            model=model, datasets=datasets, functions=functions,
            hyper_parameters=hyper_parameters, resources=resources, job_name=job_name,
            teacher_model=teacher_model, **kwargs))

    async def run(self, model: Any = None, training_datasets: Any = None,
                  validation_datasets: Any = None, functions: Any = None,
                  hyper_parameters: Optional[dict] = None, resources: Optional[dict] = None,
                  job_name: Optional[str] = None, teacher_model: Optional[str] = None,
                  lazy_load: bool = True, **kwargs: Any) -> FineTune:
        """Register functions, upload datasets, submit the job.

        Without ``init()`` the job is built from the arguments alone (``model`` is needed).
        """
        if self.tuning is None and not self.defaults:
            self.tuning = self._config_from_arguments(
                model, functions, training_datasets, validation_datasets, job_name,
                teacher_model)
        tuning = self._tuning()
        if functions is not None:
            tuning.functions = [as_typed_component(f) for f in _as_list(functions)]
        if training_datasets is not None or validation_datasets is not None:
            tuning.datasets = list(training_datasets or []) + list(validation_datasets or [])
        await self.register_functions(lazy_load=lazy_load)
        await self.upload_datasets()
        return await self.asubmit_job(model=model, hyper_parameters=hyper_parameters,
                                      resources=resources, job_name=job_name,
                                      teacher_model=teacher_model, **kwargs)

    @staticmethod
    def _config_from_arguments(model: Any, functions: Any, training: Any, validation: Any,
                               job_name: Optional[str], teacher: Optional[str]) -> JobConfig:
        if model is None:
            raise ConfigError("no job config: run() without init() needs model=",
                              where="AgenticRL.run",
                              hint="pass model='…' (and functions, datasets), or call "
                                   "client.init('job.yaml') first")
        data: dict[str, Any] = {
            "model": {"name": model} if isinstance(model, str) else model,
            "functions": [as_typed_component(f) for f in _as_list(functions)],
            "datasets": _as_list(training) + _as_list(validation)}
        if job_name:
            data["name"] = job_name
        if teacher:
            data["teacher_model"] = teacher
        return JobConfig.load_from_dict(data)

    # ---- job queries (callable on the class, like the cloud's classmethods)
    @_either
    def get(self, job_id: str) -> FineTune:
        """The job (status, progress, config)."""
        return FineTune.of_job(run_sync(self.http.request("GET", f"/v1/jobs/{job_id}")))

    @_either
    def list(self, page_no: int = 1, page_size: int = 10,
             status: Optional[str] = None, project: Optional[str] = None,
             tags: Optional[list[str]] = None, algorithm: Optional[str] = None) -> FineTune:
        """A page of jobs, newest first: ``output = {"items", "total", ...}``; ``project``,
        ``tags`` (``KEY`` or ``KEY=VALUE`` each) and ``algorithm`` filter it."""
        params = {"page_no": page_no, "page_size": page_size, "status": status,
                  "project": project, "algorithm": algorithm, "tag": list(tags or [])}
        data = run_sync(self.http.request("GET", "/v1/jobs", params={
            k: v for k, v in params.items() if v not in (None, [])}))
        data["items"] = [FineTuneOutput.model_validate(j) for j in data["items"]]
        return FineTune(output=data)

    @_either
    def cancel(self, job_id: str) -> FineTune:
        return FineTune.of_job(run_sync(self.http.request("POST", f"/v1/jobs/{job_id}/cancel")))

    @_either
    def stop(self, job_id: str) -> FineTune:
        """End a RUNNING job at its next step boundary with a checkpoint (it becomes
        STOPPED; cancel kills it where it is)."""
        out = FineTune.of_job(run_sync(self.http.request("POST", f"/v1/jobs/{job_id}/stop")))
        out.http_status = 202
        return out

    @_either
    def copy(self, job_id: str, overrides: Optional[dict[str, Any]] = None,
             job_name: Optional[str] = None) -> FineTune:
        """A new job from ``job_id``'s config with ``overrides`` (``{"dotted.key": value}``;
        a bare hyper-parameter name is short for ``training.hyper_parameters.<name>``)."""
        body = {"overrides": overrides or {}, "job_name": job_name}
        return FineTune.of_submit(run_sync(self.http.request(
            "POST", f"/v1/jobs/{job_id}/copy", json=body)), SUBMIT_OK)

    @_either
    def resume(self, job_id: str, checkpoint: Optional[str] = None) -> FineTune:
        """Continue a FAILED/CANCELED/STOPPED job from its latest (or the given) checkpoint."""
        return FineTune.of_job(run_sync(self.http.request(
            "POST", f"/v1/jobs/{job_id}/resume", json={"checkpoint": checkpoint})))

    @_either
    def delete(self, job_id: str) -> FineTune:
        return FineTune(output=run_sync(self.http.request("DELETE", f"/v1/jobs/{job_id}")))

    @_either
    def logs(self, job_id: str, offset: int = 1, lines: int = 1000) -> FineTune:
        """Log lines from ``offset`` (1-based): ``output.logs``."""
        data = run_sync(self.http.request("GET", f"/v1/jobs/{job_id}/logs",
                                          params={"offset": offset, "lines": lines}))
        return FineTune(output=FineTuneOutput.model_validate(data))

    async def follow_logs(self, job_id: str, offset: int = 1) -> AsyncIterator[str]:
        """Yield log lines as they are written until the job ends (long-poll)."""
        while True:
            data = await self.http.request(
                "GET", f"/v1/jobs/{job_id}/logs",
                params={"offset": offset, "lines": 1000, "follow": "true", "wait": 20},
                timeout=60)
            for line in data["logs"]:
                yield line
            offset = data["next_offset"]
            if data["finished"] and not data["logs"]:
                return

    async def wait(self, job_id: str, poll: float = 1.0,
                   timeout: Optional[float] = None) -> dict[str, Any]:
        """Poll until the job is SUCCEEDED, STOPPED, FAILED or CANCELED; return the job."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        while True:
            job = await self.http.request("GET", f"/v1/jobs/{job_id}")
            if job["status"] in TERMINAL:
                return job
            if timeout is not None and loop.time() - start > timeout:
                raise TimeoutError(f"job {job_id} still {job['status']} after {timeout}s")
            await asyncio.sleep(poll)
