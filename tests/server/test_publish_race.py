"""Item 14 of issue 30: parallel publishes of one name give one model and clean 409s."""

from __future__ import annotations

import json
import threading
import time

from rltune.sdk.errors import ConflictError
from rltune.server.published import find_model, publish
from rltune.server.store import open_store


def _job(store, jobs_dir, job_id):
    ck = jobs_dir / job_id / "checkpoints" / "checkpoint-1"
    ck.mkdir(parents=True)
    (ck / "config.json").write_text("{}")
    (ck / "trainer_state.json").write_text(json.dumps({"validation_reward": 0.5}))
    for i in range(300):  # linking takes a while: the publishes overlap
        (ck / f"shard-{i}.bin").write_bytes(b"w" * 1000)
    rec = {"id": job_id, "workspace": "w", "status": "SUCCEEDED", "created_at": time.time(),
           "model": "nano", "algorithm": "grpo", "config": {}}
    store.put("jobs", rec)
    (jobs_dir / job_id / "config.json").write_text(json.dumps({}))
    return rec


def test_ten_parallel_publishes_of_one_name(tmp_path, db_url):
    store = open_store(db_url or f"sqlite:///{tmp_path / 'db.sqlite'}")  # db_url: PostgreSQL
    jobs = tmp_path / "jobs"
    job = _job(store, jobs, "ft-1")
    results, start = [], threading.Barrier(10)

    def one():
        start.wait()
        try:
            results.append(publish(store, tmp_path, jobs, "w", job, "last", "same"))
        except ConflictError as exc:
            results.append(exc)
        except Exception as exc:  # anything else would be a 500
            results.append(("crash", exc))

    threads = [threading.Thread(target=one) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    made = [r for r in results if isinstance(r, dict)]
    conflicts = [r for r in results if isinstance(r, ConflictError)]
    assert len(made) == 1 and len(conflicts) == 9, results
    assert all("exists" in c.message for c in conflicts)
    target = tmp_path / "published" / "w" / "same"
    assert find_model(store, "w", "same")["path"] == str(target)
    assert len(list(target.glob("shard-*.bin"))) == 300
    assert [p.name for p in target.parent.iterdir()] == ["same"]  # no temporary folder left


def test_a_racing_folder_is_a_conflict_not_a_crash(tmp_path):
    """Two servers on one home (or a folder left behind): the rename loses cleanly."""
    from rltune.lifecycle.publish import link_model_files

    src = tmp_path / "ck"
    src.mkdir()
    (src / "config.json").write_text("{}")
    target = tmp_path / "pub" / "m"
    link_model_files(src, target)
    try:
        link_model_files(src, target)
    except ConflictError as exc:
        assert exc.where == "name" and str(tmp_path) not in exc.message
    else:
        raise AssertionError("a second folder of one name was made")
