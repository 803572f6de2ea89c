"""``GRPOTrainer.submit``: the same TRL-shaped trainer submitted to a job server, whose
workers load the pickled reward function from the uploaded workspace."""

from __future__ import annotations

import pytest

from server.conftest import start_server  # tests/server/conftest.py

pytestmark = pytest.mark.slow  # a job server and a training job


def reward_len(completions, **kwargs):
    return [-len(c) / 20 for c in completions]


def test_submit_runs_the_job_on_a_server(tmp_path, nano_model_dir):
    from rltune.client.agentic_rl import AgenticRL, run_sync
    from rltune.trl import GRPOConfig, GRPOTrainer

    (tmp_path / "home").mkdir()
    srv = start_server(tmp_path / "home")
    try:
        args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4,
                          num_generations=2, max_completion_length=16, max_steps=1,
                          save_strategy="no")
        trainer = GRPOTrainer(model=str(nano_model_dir), reward_funcs=[reward_len], args=args,
                              train_dataset=[{"prompt": f"What is {a} + 1?"} for a in range(4)])
        job_id = trainer.submit(base_url=srv.url, api_key=srv.key, wait=True)
        job = run_sync(AgenticRL(api_key=srv.key, base_url=srv.url).http.request(
            "GET", f"/v1/jobs/{job_id}"))
        assert job["status"] == "SUCCEEDED", (job.get("error"), job.get("message"), job)
    finally:
        srv.proc.kill()
