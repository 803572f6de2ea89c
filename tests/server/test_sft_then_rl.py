"""SFT before RL under a real server: an ``algorithm: sft`` job trains on calculator-agent
transcripts (tool calls included), validates its loss, checkpoints and auto-publishes its model
(``tuned_model_name``); an RL job then starts from ``model: <published name>`` and finishes."""

from __future__ import annotations

import json
import signal

import pytest
import yaml

from rltune.jobdir import CRITIC_STATE
from rltune.models.tasks import CALCULATOR_TOOL, TaskConfig, write_jsonl
from rltune.models.transcripts import make_transcripts

from .conftest import make_workspace, start_server
from .test_lifecycle import _submit, _wait
from .test_models import _until

pytestmark = [pytest.mark.slow]  # two jobs on the tiny model: ~1-2 min on a busy 2-core box


def _sft_workspace(root, model_dir):
    ws = root / "sft"
    (ws / "data").mkdir(parents=True)
    task = TaskConfig(digits=1)
    for name, seed, n in (("train", 1, 16), ("val", 2, 4)):
        rows = [{"messages": conv, "tools": [CALCULATOR_TOOL]}
                for conv in make_transcripts(n, seed, tool_fraction=0.5, config=task)]
        write_jsonl(rows, ws / "data" / f"{name}.jsonl")
    job = {
        "name": "calc-sft", "model": {"name": str(model_dir)}, "tuned_model_name": "calc-sft",
        "datasets": [{"type": "training", "file_name": "data/train.jsonl"},
                     {"type": "validation", "file_name": "data/val.jsonl"}],
        "training": {"hyper_parameters": {
            "algorithm": "sft", "batch_size": 4, "learning_rate": 3e-3, "n_epochs": 2,
            "max_length": 320, "max_prompt_length": 160, "eval_steps": 4,
            "save_strategy": "steps", "save_steps": 4, "save_total_limit": 1}},
    }
    (ws / "job.yaml").write_text(yaml.safe_dump(job))
    return ws


def test_an_sft_job_then_an_rl_job_from_its_published_model(server_home, tmp_path,
                                                            tiny_model_dir):
    srv = start_server(server_home)
    try:
        sft_id = _submit(srv, _sft_workspace(tmp_path, tiny_model_dir))
        with srv.client() as c:
            done = _wait(c, sft_id, lambda j: j["status"] in ("SUCCEEDED", "FAILED"))
            assert done["status"] == "SUCCEEDED", done
            job = _until(lambda: c.get(f"/v1/jobs/{sft_id}").json(),
                         lambda j: j["published_model"], 30)
            assert job["published_model"] == "calc-sft"
        job_dir = next((server_home / "server" / "jobs").rglob(f"{sft_id}"))
        metrics = [json.loads(x) for x in (job_dir / "metrics.jsonl").read_text().splitlines()]
        val = [m["metrics"]["validation/sft/loss"] for m in metrics
               if "validation/sft/loss" in m["metrics"]]
        assert len(val) >= 2 and val[-1] < val[0], val  # the loss on held-out transcripts fell
        assert all("sft/loss" in m["metrics"] for m in metrics if m["step"] > 0)
        published = server_home / "published" / "default" / "calc-sft"
        assert (published / "config.json").is_file()
        assert not (published / CRITIC_STATE).exists()

        rl = make_workspace(tmp_path / "rl", tiny_model_dir, n_epochs=1)
        rl_job = yaml.safe_load((rl / "job.yaml").read_text())
        rl_job["model"]["name"] = "calc-sft"  # the published SFT model, by name
        (rl / "job.yaml").write_text(yaml.safe_dump(rl_job))
        rl_id = _submit(srv, rl)
        with srv.client() as c:
            done = _wait(c, rl_id, lambda j: j["status"] in ("SUCCEEDED", "FAILED"))
            assert done["status"] == "SUCCEEDED", done
        rl_dir = next((server_home / "server" / "jobs").rglob(f"{rl_id}"))
        assert str(published) in (rl_dir / "train.log").read_text()
    finally:
        srv.kill(signal.SIGTERM)
