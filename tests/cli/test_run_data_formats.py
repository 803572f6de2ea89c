"""``rltune run`` takes the data formats ``rltune train`` takes: a parquet file and a folder
saved by ``datasets.Dataset.save_to_disk`` are uploaded (as JSONL rows) and the job runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml
from rltune_test_server_fixtures import make_workspace


def test_run_uploads_parquet_and_a_datasets_folder(server, tmp_path, tiny_model_dir):
    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    datasets = pytest.importorskip("datasets")
    ws = make_workspace(tmp_path, tiny_model_dir, max_steps=1, save_strategy="no")
    rows = [json.loads(line) for line in (ws / "data" / "train.jsonl").read_text().splitlines()]
    val = [json.loads(line) for line in (ws / "data" / "val.jsonl").read_text().splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), ws / "data" / "train.parquet")
    datasets.Dataset.from_list(val).save_to_disk(str(ws / "data" / "val_ds"))
    job = yaml.safe_load((ws / "job.yaml").read_text())
    for ds in job["datasets"]:
        ds["file_name"] = ("data/train.parquet" if ds["type"] == "training"
                           else "data/val_ds")
    (ws / "job.yaml").write_text(yaml.safe_dump(job))

    env = {**os.environ, "RLTUNE_HOME": str(server.home), "RLTUNE_BASE_URL": server.url}
    env.pop("RLTUNE_API_KEY", None)
    r = subprocess.run([sys.executable, "-m", "rltune.cli.main", "run", "-c", "job.yaml",
                        "--no-follow", "-o", "json"], cwd=ws, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    job_id = json.loads(r.stdout)["job_id"]
    with server.client() as c:
        files = {f["filename"]: f["rows"] for f in c.get("/v1/files").json()["items"]}
        c.post(f"/v1/jobs/{job_id}/cancel")
    assert files == {"train.jsonl": len(rows), "val_ds.jsonl": len(val)}
