"""``rltune doctor``: the machine report, and what a job.yaml would use (in process)."""

from __future__ import annotations

import json

import torch
from typer.testing import CliRunner

from rltune.cli.main import app


def _doctor(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["doctor", *args])
    return result.exit_code, result.output


def _job(tmp_path, model: str, **extra) -> str:
    path = tmp_path / "job.yaml"
    path.write_text(json.dumps({"name": "doc", "model": {"name": model, **extra}}))
    return str(path)


def test_machine_report_names_torch_devices_and_engines(hf_home):
    code, out = _doctor("--json")
    assert code == 0, out
    machine = json.loads(out)["machine"]
    assert machine["torch"] == torch.__version__
    assert machine["devices"][0].startswith("cpu (")
    assert len(machine["devices"]) == 1 + (torch.cuda.device_count()
                                          if torch.cuda.is_available() else 0)
    assert machine["engines"]["builtin"].startswith("available")
    assert "vllm" in machine["engines"]
    assert machine["hf_cache"] == str(hf_home / "hub")
    assert machine["hf_downloads"] == "off (HF_HUB_OFFLINE)"
    code, text = _doctor()
    assert code == 0 and "engines:" in text and f"torch: {torch.__version__}" in text


def test_job_plan_for_a_cached_hub_model(hf_home, tmp_path):
    code, out = _doctor("-c", _job(tmp_path, "acme/qwen-standin",
                                   chat_template_kwargs={"enable_thinking": False}), "--json")
    assert code == 0, out
    job = json.loads(out)["job"]
    assert job["problems"] == []
    assert job["engine"] == "builtin" and job["dtype"] == "float32"
    assert job["device"].split()[0] in ("cpu", "cuda:0")
    snapshot = next((hf_home / "hub" / "models--acme--qwen-standin" / "snapshots").iterdir())
    assert job["models"]["model.name"] == (f"acme/qwen-standin → Hugging Face hub id (cached at "
                                           f"{snapshot})")
    assert job["tool_call_parser"] == "hermes (from the model family)"
    assert job["chat_template_kwargs"] == '{"enable_thinking": false}'


def test_job_plan_reports_what_stops_a_job(hf_home, tmp_path):
    code, out = _doctor("-c", _job(tmp_path, "acme/absent"))
    assert code == 1
    assert "acme/absent: not found" in out and "HF_HUB_OFFLINE" in out
    code, out = _doctor("-c", _job(tmp_path, "acme/qwen-standin", tool_call_parser="mistral"),
                        "--json")
    assert code == 0 and json.loads(out)["job"]["tool_call_parser"] == \
        "mistral (model.tool_call_parser)"
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodel: {name: nano}\ntraining: {hyper_parameters: {batch_sise: 4}}\n")
    code, out = _doctor("-c", str(bad))
    assert code == 1 and "batch_sise" in out
