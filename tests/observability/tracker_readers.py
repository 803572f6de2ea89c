"""Read each tracker's run back with that tracker's own reader (tests only).

W&B 0.31 no longer ships a Python reader for its offline ``.wandb`` transaction log, so
``wandb_history`` reads the log's documented framing (a LevelDB log: 32 KiB blocks, 7-byte
record headers) and decodes each record with W&B's own protobuf ``Record``.
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path


def tensorboard_series(logdir: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def mlflow_series(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    from mlflow import MlflowClient

    hist = MlflowClient(tracking_uri=uri).get_metric_history(run_id, key)
    return sorted((m.step, m.value) for m in hist)


def _leveldb_records(path: Path, header_len: int = 7) -> list[bytes]:
    data = path.read_bytes()
    pos, out, partial = header_len, [], b""
    block = 32768
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            break
        if kind == 1:  # FULL
            out.append(chunk)
        elif kind == 2:  # FIRST
            partial = chunk
        elif kind == 3:  # MIDDLE
            partial += chunk
        elif kind == 4:  # LAST
            out.append(partial + chunk)
    return out


def wandb_history(run_dir: Path, wait_for: str = "", timeout: float = 20.0) -> list[dict]:
    """History rows (``_step`` plus values) of an offline run folder. W&B's core process may
    still be writing after ``finish()`` returns; ``wait_for`` polls until a row has that key."""
    deadline = time.monotonic() + timeout
    while True:
        rows = _wandb_rows(run_dir)
        if not wait_for or any(wait_for in r for r in rows) or time.monotonic() > deadline:
            return rows
        time.sleep(0.2)


def _wandb_records(run_dir: Path, field: str) -> list:
    """The W&B protobuf ``Record``s of an offline run's log that have ``field`` set."""
    from wandb.proto import wandb_internal_pb2 as pb

    logs = sorted(run_dir.glob("run-*.wandb"))  # none yet while W&B's core starts the run
    out = []
    for raw in _leveldb_records(logs[0]) if logs else []:
        rec = pb.Record()
        rec.ParseFromString(raw)
        if rec.HasField(field):
            out.append(rec)
    return out


def _wandb_rows(run_dir: Path) -> list[dict]:
    rows = []
    for rec in _wandb_records(run_dir, "history"):
        row = {}
        for item in rec.history.item:
            key = item.key or "/".join(item.nested_key)
            row[key] = json.loads(item.value_json)
        rows.append(row)
    return rows


def wandb_run_dirs(root: Path) -> list[Path]:
    return sorted(root.glob("wandb/offline-run-*"))


def swanlab_scalars(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """``{key: [(step, value)]}`` from an offline SwanLab run, with SwanLab's reader."""
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.sdk.internal.core_python.store import DataStoreReader

    (log,) = run_dir.glob("run-*.swanlab")
    reader = DataStoreReader()
    reader.open(log)
    series: dict[str, list[tuple[int, float]]] = {}
    for raw in reader:
        rec = Record()
        rec.ParseFromString(raw)
        if rec.HasField("scalar"):
            s = rec.scalar
            series.setdefault(s.key, []).append((s.step, s.value.number))
    reader.close()
    return series


def wandb_alerts(run_dir: Path, timeout: float = 20.0) -> list[tuple[str, str, str]]:
    """``(title, text, level)`` of the W&B alerts in an offline run's transaction log."""
    deadline = time.monotonic() + timeout
    while True:
        out = [(r.alert.title, r.alert.text, r.alert.level)
               for r in _wandb_records(run_dir, "alert")]
        if out or time.monotonic() > deadline:
            return out
        time.sleep(0.2)


def wandb_run_project(run_dir: Path, timeout: float = 20.0) -> str:
    """The project in an offline run's ``run`` record; polls, as W&B's core process may still
    be writing after ``finish()`` returns."""
    deadline = time.monotonic() + timeout
    while True:
        runs = _wandb_records(run_dir, "run")
        if runs:
            return runs[0].run.project
        if time.monotonic() > deadline:
            raise AssertionError(f"no run record in {run_dir}")
        time.sleep(0.2)
