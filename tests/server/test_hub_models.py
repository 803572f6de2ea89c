"""The job server refuses a job whose hub model is not cached while offline, at submit, before
a job record or directory exists; a cached hub id is accepted."""

from __future__ import annotations

import json

ROW = json.dumps({"messages": [{"role": "user", "content": "1+1"}]}) + "\n"


def test_submit_checks_the_model_before_creating_the_job(hf_home, server):
    with server.client() as c:
        f = c.post("/v1/files", params={"filename": "t.jsonl"}, content=ROW * 4).json()
        job = {"model": "acme/absent", "datasets": [{"type": "training", "file_id": f["file_id"]}],
               "training": {"hyper_parameters": {"batch_size": 2, "n_rollouts": 2,
                                                "max_length": 1024, "max_prompt_length": 256}}}
        r = c.post("/v1/jobs", json={"config": job})
        err = r.json()["error"]
        assert r.status_code == 404 and err["where"] == "model.name", r.text
        assert "not in the Hugging Face cache" in err["message"] and "hf download" in err["hint"]
        assert c.get("/v1/jobs").json()["total"] == 0
        jobs = server.home / "server" / "jobs"
        assert not jobs.exists() or not any(jobs.iterdir())  # no job directory either
        r = c.post("/v1/jobs", json={"config": {**job, "model": "acme/qwen-standin"}})
        assert r.status_code == 201, r.text
        c.post(f"/v1/jobs/{r.json()['job_id']}/cancel")
