"""Ark's tos_bucket / tos_paths as ``s3://`` datasets, read with fsspec/s3fs from an
S3-compatible store: a moto server on loopback stands in for TOS/MinIO."""

from __future__ import annotations

import json

import pytest

from rltune.config import load_job_config_text
from rltune.config.download import download_to_files, fetch
from rltune.sdk.errors import DatasetError

ROW = {"messages": [{"role": "user", "content": "1+1?"}], "rollout_extra": {"solution": "2"}}


@pytest.fixture
def s3_store(monkeypatch):
    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    import boto3

    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    for key, value in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
                       "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": url}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL_S3", raising=False)
    s3 = boto3.client("s3", endpoint_url=url)
    s3.create_bucket(Bucket="rl-data")
    s3.put_object(Bucket="rl-data", Key="ark/train.jsonl",
                  Body=((json.dumps(ROW) + "\n") * 3).encode())
    yield url
    server.stop()


def test_s3_datasets_are_fetched_from_the_store(s3_store, tmp_path):
    assert fetch("s3://rl-data/ark/train.jsonl", where="d").count(b"\n") == 3
    job = load_job_config_text(
        "model: nano\ndatasets:\n  - {type: training, data_source_type: download_url, "
        "download_url: 's3://rl-data/ark/train.jsonl'}\n")
    fixed = download_to_files(job, tmp_path / "data")
    assert fixed.datasets[0].file_name.endswith("train.jsonl")
    with pytest.raises(DatasetError, match="does not exist"):
        fetch("s3://rl-data/ark/missing.jsonl", where="datasets[0].download_url")
    with pytest.raises(DatasetError, match="larger than"):
        fetch("s3://rl-data/ark/train.jsonl", where="d", max_bytes=10)
