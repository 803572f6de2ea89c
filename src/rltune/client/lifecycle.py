"""Client methods of the model lifecycle (publish, deploy, evaluate, export); mixed into
``AgenticRL``. They return the server's JSON as dicts.

Example::

    client = AgenticRL()
    client.publish_model("ft-…", name="calc-v1", checkpoint="best")
    dep = client.deploy(["calc-v1"])          # dep["api_key"] is shown once
    client.wait_deployment(dep["deployment_id"])["base_url"]   # → OpenAI(base_url=..., ...)
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional, Union

from rltune.client.http import CHUNK_BYTES
from rltune.sdk.errors import ConflictError, RltuneError


class LifecycleMixin:
    http: Any

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        from rltune.client.agentic_rl import run_sync

        return run_sync(self.http.request(method, path, **kwargs))

    # ---- published models
    def publish_model(self, job_id: str, name: str,
                      checkpoint: Union[int, str] = "best", description: str = "") -> dict:
        """Publish a checkpoint (step number, 'best' or 'last') of a job as model ``name``."""
        return self._call("POST", "/v1/models", json={
            "job_id": job_id, "name": name, "checkpoint": checkpoint,
            "description": description})

    def list_models(self, page_no: int = 1, page_size: int = 50) -> dict:
        return self._call("GET", "/v1/models", params={"page_no": page_no,
                                                       "page_size": page_size})

    def get_model(self, name: str) -> dict:
        return self._call("GET", f"/v1/models/{name}")

    def delete_model(self, name: str) -> dict:
        return self._call("DELETE", f"/v1/models/{name}")

    def export_model(self, name: str, out_dir: str | Path, part: str = "merged",
                     progress: Optional[Callable[[int, Optional[int]], None]] = None) -> Path:
        """Download ``part`` (merged | adapter) into the new folder ``out_dir``: the archive
        streams to a file next to it chunk by chunk and is unpacked from there, so memory does
        not grow with the model. ``progress(bytes_so_far, total)`` follows the download."""
        out = Path(out_dir)
        if out.exists() and any(out.iterdir()):
            raise ConflictError(f"{out} exists and is not empty", where=str(out),
                                hint="choose a new folder")
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out.parent) as archive:  # unnamed: gone on any exit
            self.http.download(f"/v1/models/{name}/export", archive, params={"part": part},
                               progress=progress)
            archive.seek(0)
            out.mkdir(exist_ok=True)
            with tarfile.open(fileobj=archive, mode="r|gz") as tar:
                for member in tar:
                    _head, _, rest = member.name.partition("/")
                    if not member.isfile() or not rest or ".." in Path(rest).parts:
                        continue
                    dest = out / rest
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    src = tar.extractfile(member)
                    with open(dest, "wb") as fh:
                        shutil.copyfileobj(src, fh, CHUNK_BYTES)  # type: ignore[arg-type]
        return out

    def push_model(self, name: str, repo_id: str, part: str = "merged",
                   private: bool = True) -> dict:
        """Upload to a Hugging Face hub with the server's HF_TOKEN; ``commit_url``."""
        return self._call("POST", f"/v1/models/{name}/push", json={
            "repo_id": repo_id, "part": part, "private": private})

    # ---- deployments
    def deploy(self, models: list[str], name: str = "", threads: Optional[int] = None,
               engine: str = "builtin") -> dict:
        """Serve published models on one endpoint; the answer carries ``api_key`` once.

        ``engine``: ``builtin`` or ``vllm`` (where the server has vLLM; one model, no
        ``threads``)."""
        body: dict[str, Any] = {"models": list(models), "name": name, "engine": engine}
        if threads is not None:
            body["threads"] = threads
        return self._call("POST", "/v1/deployments", json=body)

    def get_deployment(self, deployment_id: str) -> dict:
        return self._call("GET", f"/v1/deployments/{deployment_id}")

    def list_deployments(self) -> dict:
        return self._call("GET", "/v1/deployments")

    def stop_deployment(self, deployment_id: str) -> dict:
        return self._call("POST", f"/v1/deployments/{deployment_id}/stop")

    def deployment_logs(self, deployment_id: str, lines: int = 200) -> list[str]:
        return self._call("GET", f"/v1/deployments/{deployment_id}/logs",
                          params={"lines": lines})["logs"]

    def wait_deployment(self, deployment_id: str, timeout: float = 300.0) -> dict:
        """Poll until RUNNING (returned) or FAILED/STOPPED (raised)."""
        return self._wait(lambda: self.get_deployment(deployment_id), "RUNNING",
                          ("FAILED", "STOPPED"), timeout, f"deployment {deployment_id}")

    # ---- evaluations
    def evaluate(self, job_id: str, models: Optional[list[str]] = None,
                 dataset: str = "validation", n: int = 4, k: int = 1,
                 threshold: float = 1.0) -> dict:
        """Start an evaluation of ``models`` ('base' = the job's base model, or published
        names) with the job's rollout and rewards; poll with ``wait_evaluation``."""
        return self._call("POST", "/v1/evaluations", json={
            "job_id": job_id, "models": models or ["base"], "dataset": dataset, "n": n,
            "k": k, "threshold": threshold})

    def get_evaluation(self, evaluation_id: str) -> dict:
        return self._call("GET", f"/v1/evaluations/{evaluation_id}")

    def wait_evaluation(self, evaluation_id: str, timeout: float = 1800.0) -> dict:
        return self._wait(lambda: self.get_evaluation(evaluation_id), "SUCCEEDED",
                          ("FAILED",), timeout, f"evaluation {evaluation_id}")

    @staticmethod
    def _wait(get: Any, ok: str, bad: tuple[str, ...], timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            rec = get()
            if rec["status"] == ok:
                return rec
            if rec["status"] in bad:
                raise RltuneError(f"{what} is {rec['status']}: {rec.get('error')}", where=what)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} still {rec['status']} after {timeout:.0f} s")
            time.sleep(0.5)


