"""Ark's job metadata (``tags``, ``project``) kept on the job and used by job lists: the
REST filters, the client and ``rltune list``'s columns, against a real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys

ROW = json.dumps({"messages": [{"role": "user", "content": "1+1?"}],
                  "rollout_extra": {"solution": "2"}}) + "\n"


def _job(file_id: str, meta: str) -> str:
    return (f"model: stand-in\ndatasets:\n  - {{type: training, file_id: {file_id}}}\n"
            f"training: {{hyper_parameters: {{batch_size: 2, n_rollouts: 2}}}}\n{meta}")


def test_tags_and_project_are_listed_and_filtered(server):
    model = server.home / "models" / "stand-in"  # weightless: each job fails once started
    model.mkdir(parents=True)
    (model / "config.json").write_text('{"model_type": "qwen2"}')
    with server.client() as c:
        fid = c.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW * 4).json()
        fid = fid["file_id"]
        ids = {}
        for name, meta in (("a", "project: agents\ntags: {team: search, exp: '7'}\n"),
                           ("b", "project: agents\ntags: {team: math}\n"),
                           ("c", "")):
            res = c.post("/v1/jobs", json={"config_yaml": _job(fid, meta), "job_name": name})
            assert res.status_code == 201, res.text
            ids[name] = res.json()["job_id"]
        assert res.json()["project"] is None and res.json()["tags"] == {}

        def listed(**params):
            out = c.get("/v1/jobs", params=params).json()
            return sorted(j["job_name"] for j in out["items"]), out["total"]

        assert listed(project="agents") == (["a", "b"], 2)
        assert listed(tag="team=search") == (["a"], 1)
        assert listed(tag=["team", "exp=7"]) == (["a"], 1)
        assert listed(project="agents", tag="team=math", page_size=1) == (["b"], 1)
        assert listed(project="nothing") == ([], 0)
        assert listed() == (["a", "b", "c"], 3)
        job = c.get(f"/v1/jobs/{ids['a']}").json()
        assert job["project"] == "agents" and job["tags"] == {"team": "search", "exp": "7"}
        assert c.get("/v1/jobs", params={"tag": "=x"}).status_code == 422
    env = {**os.environ, "RLTUNE_HOME": str(server.home), "RLTUNE_BASE_URL": server.url}
    proc = subprocess.run([sys.executable, "-m", "rltune.cli.main", "list", "--project",
                           "agents", "--tag", "team=search", "-o", "json"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    items = json.loads(proc.stdout)["items"]
    assert [(j["project"], j["tags"]) for j in items] == [("agents",
                                                          {"team": "search", "exp": "7"})]
