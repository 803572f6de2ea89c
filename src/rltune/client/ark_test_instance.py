"""Ark's online plugin test (``ark_sdk.resources.pipeline_plugin.test_instance``) on the rltune
server: the plugin's workspace is registered as a function and loaded as an instance (a worker
pool in the server, as a job runs it), then called with Ark's request shape.

    instance = get_or_create_pipeline_plugin_test_instance(calc_rollout)
    out = instance.request({"context": {...}, "proxy": {"url", "jwt_token"}, "sample": {...}})
    instance.sync()    # the workspace's current code, registered and loaded again if it changed
    instance.stop()

A rollout answers ``{"kind", "status", "error", "trajectory", "seconds"}``, a grader (request
``{"context", "sample", "trajectory"}`` or ``"trajectories"``) ``{"kind", "status", "error",
"rewards", "metrics", "seconds"}``: the answer of ``rltune ark test pipeline_plugin``, from a
worker of the server instead of this process. The server is the one every client uses
(``rltune ark login``, ``RLTUNE_BASE_URL``, else the local server). An existing instance of the
same code is reused; ``context`` is not sent (the server's worker makes its own).
"""

from __future__ import annotations

import inspect
import tempfile
from pathlib import Path
from typing import Any, Optional

from rltune.ark.plugins import plugin_spec
from rltune.ark.proxy import as_message_dict
from rltune.ark.types import ChatCompletionSample, Trajectory
from rltune.client.agentic_rl import AgenticRL, run_sync
from rltune.sdk.data import DISCARD_ERROR_CODE
from rltune.sdk.errors import UserCodeError

#: Ark plugin kinds → rltune function types.
FUNCTION_TYPES = {"rollout": "rollout", "single_grader": "reward",
                  "group_grader": "group_reward"}
#: rltune's error codes of a failed Ark call → Ark's status.
_STATUS = {DISCARD_ERROR_CODE: "discard", "ark_retry": "retry", "ark_failure": "failure"}


def locate(fn: Any, workspace: Optional[str | Path] = None) -> tuple[Path, str]:
    """The workspace folder of a plugin and its ``module:function`` classpath there (a plugin
    of a script run as ``__main__`` is named by its file)."""
    spec = plugin_spec(fn)
    source = inspect.getsourcefile(spec.func)
    if source is None:
        raise UserCodeError(f"{spec.name}: its source file is unknown", where=spec.name,
                            hint="define the plugin in a file of the workspace")
    file = Path(source).resolve()
    if workspace is not None:
        root = Path(workspace).resolve()
    else:  # the first folder up that is not a package
        root = file.parent
        while (root / "__init__.py").is_file():
            root = root.parent
    try:
        module = ".".join(file.relative_to(root).with_suffix("").parts)
    except ValueError:
        raise UserCodeError(f"{file} is not inside the workspace {root}", where="workspace",
                            hint="pass workspace= the folder that holds the plugins") from None
    return root, f"{module}:{spec.func.__name__}"


class PipelinePluginTestInstance:
    """One plugin loaded on the server: :meth:`request`, :meth:`sync`, :meth:`stop`."""

    def __init__(self, fn: Any, *, workspace: Optional[str | Path] = None,
                 client: Optional[AgenticRL] = None, envs: Optional[dict[str, str]] = None):
        self.spec = plugin_spec(fn)
        self.kind = self.spec.kind
        self.root, self.classpath = locate(fn, workspace)
        self.client = client or AgenticRL()
        self.envs = dict(envs or {})
        self.entity_id = ""
        self.instance_id = ""
        self.sync()

    def _call(self, method: str, path: str, **kw: Any) -> Any:
        return run_sync(self.client.http.request(method, path, **kw))

    def sync(self) -> PipelinePluginTestInstance:
        """Serve the workspace's current code: reuse a loaded instance of the same code, else
        register it and load an instance (stopping this object's previous one)."""
        from rltune.functions.archive import zip_workspace

        with tempfile.TemporaryDirectory() as tmp:
            arc = zip_workspace(self.root, Path(tmp) / "ws.zip")
            body = arc.path.read_bytes()
        ftype = FUNCTION_TYPES[self.kind]
        entity = next((f for f in self._call("GET", "/v1/functions",
                                             params={"type": ftype, "page_size": 500})["items"]
                       if f["classpath"] == self.classpath
                       and f["archive_sha256"] == arc.sha256), None)
        if entity is None:
            entity = self._call("POST", "/v1/functions", content=body,
                                params={"classpath": self.classpath, "type": ftype,
                                        "name": self.spec.name},
                                headers={"Content-Type": "application/zip"})
        if entity["entity_id"] == self.entity_id and self.instance_id:
            return self
        previous = self.instance_id
        live = None if self.envs else next(
            (i for i in self._call("GET", "/v1/instances", params={"page_size": 500})["items"]
             if i["entity_id"] == entity["entity_id"] and i["status"] == "active"), None)
        if live is None:
            runtime = {"env": self.envs} if self.envs else None
            live = self._call("POST", f"/v1/functions/{entity['entity_id']}/load",
                              json={"runtime": runtime})
        self.entity_id, self.instance_id = entity["entity_id"], live["instance_id"]
        if previous and previous != self.instance_id:
            self._call("DELETE", f"/v1/instances/{previous}")
        return self

    def request(self, request: dict[str, Any], sync: bool = True) -> dict[str, Any]:
        """One call with Ark's request shape; waits for the answer (``sync`` is accepted for
        Ark's signature: the call is always synchronous here)."""
        if "sample" not in request or (self.kind == "rollout" and "proxy" not in request):
            raise UserCodeError("the request has no 'sample'" if "sample" not in request else
                                "the request has no 'proxy'", where="request",
                                hint="a rollout takes {context, proxy: {url, jwt_token}, "
                                     "sample}; a grader {context, sample, trajectory|"
                                     "trajectories}")
        sample = ChatCompletionSample.model_validate(request["sample"])
        res = self._call("POST", f"/v1/instances/{self.instance_id}/test",
                         json={"input": self._input(sample, request),
                               "type": FUNCTION_TYPES[self.kind]})
        output = res.get("output") or {}
        ok = res.get("status") == "success"
        answer: dict[str, Any] = {
            "kind": self.kind, "seconds": res.get("seconds"),
            "status": "success" if ok else _STATUS.get(output.get("error_code"), "failure"),
            "error": output.get("error") or ""}
        if self.kind == "rollout":
            ark = (output.get("agent_output") or {}).get("ark") or {}
            answer["trajectory"] = ark.get("trajectory")
            return answer
        reward = output.get("reward") or {}
        scores = reward.get("rewards") if self.kind == "group_grader" else [reward]
        answer["rewards"] = [r["reward_score"] for r in scores or [] if "reward_score" in r]
        metrics = (scores or [{}])[0].get("reward_metrics") if scores else None
        answer["metrics"] = metrics or {}
        return answer

    def _input(self, sample: ChatCompletionSample, request: dict[str, Any]) -> dict[str, Any]:
        prompt = [as_message_dict(m) for m in sample.messages]
        if self.kind == "rollout":
            proxy = request["proxy"]
            data: dict[str, Any] = {
                "messages": prompt, "tools": sample.tools,
                "model_resource": {"model_name": sample.model or "nano",
                                   "base_url": str(proxy.get("url", "")),
                                   "api_key": str(proxy.get("jwt_token") or "EMPTY")},
                "sampling_params": {"temperature": sample.temperature, "top_p": sample.top_p,
                                    "max_tokens": sample.max_new_tokens}}
            for key in ("extra", "thinking"):
                if getattr(sample, key) is not None:
                    data[key] = getattr(sample, key)
            return data
        raw = (request.get("trajectories") if self.kind == "group_grader"
               else [request.get("trajectory") or {}]) or []
        ark_sample = sample.model_dump(mode="json", exclude_none=True)
        outputs = []
        for item in raw:
            trajectory = Trajectory.model_validate(item)
            turns = [as_message_dict(m) for m in trajectory.messages]
            outputs.append({"messages": prompt + turns, "ark": {
                "sample": ark_sample,
                "trajectory": trajectory.model_dump(mode="json", exclude_none=True)}})
        if self.kind == "group_grader":
            return {"agent_outputs": outputs}
        return {"agent_output": outputs[0]}

    def stop(self) -> None:
        """Stop the instance (the registered function stays, for the next test to reuse)."""
        if self.instance_id:
            self._call("DELETE", f"/v1/instances/{self.instance_id}")
            self.instance_id = ""


def get_or_create_pipeline_plugin_test_instance(
        fn: Any, *, workspace: Optional[str | Path] = None, envs: Optional[dict[str, str]] = None,
        api_key: Optional[str] = None, base_url: Optional[str] = None,
) -> PipelinePluginTestInstance:
    """A loaded instance of the plugin ``fn`` (a decorated function) on the rltune server."""
    return PipelinePluginTestInstance(fn, workspace=workspace, envs=envs,
                                      client=AgenticRL(api_key=api_key, base_url=base_url))
