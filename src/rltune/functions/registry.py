"""The function registry: records of registered components (entities) and of loaded instances.

Layout under ``$RLTUNE_HOME/functions/`` (``~/.rltune`` when unset)::

    archives/<sha256>.zip        one per distinct workspace content
    workspaces/<sha256>/         the archive extracted, what instances run
    entities/<ro|rw|grw>-….json  FunctionEntity records
    instances/<…>-ins-….json     FunctionInstance records of ``rltune functions load``

Registering zips the workspace (``rltune.functions.archive``) and returns an entity id
(``ro-…``, ``rw-…``, ``grw-…`` as on the cloud). The registry keeps records only and starts
nothing: ``spec_for`` turns an entity into the spec a pool runs, and whoever loads it
(``rltune.functions.front.run_instance``) starts the processes. The CLI records its instances
here; the job server keeps its own in its store (``rltune.server.instances.InstanceManager``).

Example:
    >>> import tempfile, pathlib
    >>> reg = FunctionRegistry(tempfile.mkdtemp())
    >>> ws = pathlib.Path(tempfile.mkdtemp()); _ = (ws / "r.py").write_text("x = 1\\n")
    >>> ent = reg.register("r.py:R", "reward", ws)
    >>> ent.entity_id.startswith("rw-"), reg.get(ent.entity_id).classpath
    (True, 'r.py:R')
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel

from rltune._process import pid_alive
from rltune.functions.archive import extract_archive, zip_workspace
from rltune.functions.spec import FunctionComponentRuntime, FunctionComponentSpec
from rltune.paths import functions_home
from rltune.sdk.data import FunctionType
from rltune.sdk.errors import NotFoundError
from rltune.sdk.loader import parse_classpath

PREFIX = {FunctionType.ROLLOUT: "ro", FunctionType.REWARD: "rw",
          FunctionType.GROUP_REWARD: "grw"}


class FunctionEntity(BaseModel):
    """A registered function: which class, which type, which workspace content."""

    entity_id: str
    func_type: FunctionType
    name: str
    classpath: str
    archive_sha256: str
    archive_size: int
    files: list[str]
    source: str
    created_at: float


class FunctionInstance(BaseModel):
    """A loaded function: a pool of workers behind one URL (alive while its owner process runs)."""

    instance_id: str
    entity_id: str
    func_type: FunctionType
    url: str
    trigger_url: str
    status: str = "active"
    runtime: FunctionComponentRuntime
    timeout: Optional[float] = None
    owner_pid: int
    created_at: float


def _write_json(path: Path, model: BaseModel) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(model.model_dump_json(indent=2))
    os.replace(tmp, path)


def new_instance_id(func_type: str | FunctionType) -> str:
    """A fresh instance id: ``ro-ins-…``, ``rw-ins-…`` or ``grw-ins-…``."""
    return f"{PREFIX[FunctionType(func_type)]}-ins-{uuid.uuid4().hex[:16]}"


class FunctionRegistry:
    """Records of function entities (and of CLI-loaded instances); it starts no process."""

    def __init__(self, home: str | Path | None = None):
        self.root = functions_home(home)

    def _dir(self, name: str) -> Path:
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    # ---- entities --------------------------------------------------------------------------
    def register(self, classpath: str, func_type: str | FunctionType,
                 workspace: str | Path = ".", name: Optional[str] = None) -> FunctionEntity:
        """Package ``workspace`` and record the component; return the entity (``ro-…``)."""
        ftype = FunctionType(func_type)
        cp = parse_classpath(classpath)
        ws = Path(workspace).resolve()
        if not (ws / cp.relative_file).is_file():
            raise NotFoundError(f"{cp.relative_file} does not exist in the workspace",
                                where=str(ws), hint="give the classpath relative to the workspace")
        tmp = self._dir("archives") / f".{uuid.uuid4().hex}.zip"
        arc = zip_workspace(ws, tmp)
        final = self._dir("archives") / f"{arc.sha256}.zip"
        if final.exists():
            tmp.unlink()
        else:
            os.replace(tmp, final)
        if cp.relative_file not in arc.files:
            raise NotFoundError(f"{cp.relative_file} is excluded from the archive",
                                where=str(ws),
                                hint="move it out of an excluded folder (data/, tests/, …) or "
                                     "un-ignore it in .gitignore")
        entity = FunctionEntity(
            entity_id=f"{PREFIX[ftype]}-{uuid.uuid4().hex[:16]}", func_type=ftype,
            name=name or f"{ftype.value}-{cp.class_name}", classpath=classpath,
            archive_sha256=arc.sha256, archive_size=arc.size, files=arc.files, source=str(ws),
            created_at=time.time())
        _write_json(self._dir("entities") / f"{entity.entity_id}.json", entity)
        return entity

    def get(self, entity_id: str) -> FunctionEntity:
        path = self.root / "entities" / f"{entity_id}.json"
        if not path.is_file():
            raise NotFoundError(f"no registered function {entity_id!r}", where=str(self.root),
                                hint="list them with `rltune functions list`")
        return FunctionEntity.model_validate_json(path.read_text())

    def list(self, func_type: str | FunctionType | None = None) -> list[FunctionEntity]:
        items = [FunctionEntity.model_validate_json(p.read_text())
                 for p in sorted(self._dir("entities").glob("*.json"))]
        if func_type is not None:
            items = [e for e in items if e.func_type == FunctionType(func_type)]
        return sorted(items, key=lambda e: e.created_at)

    def workspace_of(self, entity: FunctionEntity) -> Path:
        """The extracted workspace of an entity (extracted once per content hash)."""
        dest = self._dir("workspaces") / entity.archive_sha256
        if not (dest / ".rltune-extracted").exists():
            staging = self._dir("workspaces") / f".{uuid.uuid4().hex}"
            extract_archive(self.root / "archives" / f"{entity.archive_sha256}.zip", staging)
            (staging / ".rltune-extracted").write_text(entity.archive_sha256)
            try:
                os.replace(staging, dest)
            except OSError:  # another process extracted it first
                import shutil

                shutil.rmtree(staging, ignore_errors=True)
        return dest

    # ---- instances -------------------------------------------------------------------------
    def spec_for(self, entity_id: str, runtime: FunctionComponentRuntime | dict | None = None,
                 timeout: Optional[float] = None, **fields: Any) -> FunctionComponentSpec:
        """The pool spec that runs an entity from its extracted workspace."""
        entity = self.get(entity_id)
        return FunctionComponentSpec(
            classpath=entity.classpath, func_type=entity.func_type,
            workspace=self.workspace_of(entity), name=entity.name, timeout=timeout,
            runtime=runtime or FunctionComponentRuntime(), **fields)

    def record_instance(self, entity_id: str, url: str,
                        runtime: FunctionComponentRuntime, timeout: Optional[float] = None,
                        owner_pid: Optional[int] = None) -> FunctionInstance:
        """Record a running instance of ``entity_id`` served at ``url`` (status ``active``)."""
        entity = self.get(entity_id)
        instance = FunctionInstance(
            instance_id=new_instance_id(entity.func_type), entity_id=entity_id,
            func_type=entity.func_type, url=url, trigger_url=f"{url}/api/v1", runtime=runtime,
            timeout=timeout, owner_pid=owner_pid or os.getpid(), created_at=time.time())
        _write_json(self._dir("instances") / f"{instance.instance_id}.json", instance)
        return instance

    def mark_stopped(self, instance_id: str) -> FunctionInstance:
        """Record that the instance stopped serving."""
        instance = self.get_instance(instance_id)
        instance.status = "stopped"
        _write_json(self._dir("instances") / f"{instance_id}.json", instance)
        return instance

    def get_instance(self, instance_id: str) -> FunctionInstance:
        path = self.root / "instances" / f"{instance_id}.json"
        if not path.is_file():
            raise NotFoundError(f"no function instance {instance_id!r}", where=str(self.root),
                                hint="load one with `rltune functions load <entity_id>`")
        inst = FunctionInstance.model_validate_json(path.read_text())
        if inst.status == "active" and not pid_alive(inst.owner_pid):
            inst.status = "stopped"  # its owner died without cleaning up
        return inst

    def list_instances(self) -> list[FunctionInstance]:
        return [self.get_instance(p.stem) for p in sorted(self._dir("instances").glob("*.json"))]
