"""A real job server process and real jobs for the console's browser tests.

``ServerProc.start(home)`` runs ``python -m rltune.server --port 0`` with ``RLTUNE_HOME=home``
and reads the chosen address and the admin key it writes. ``submit_calc_job`` goes the user's
way through the REST API: upload the datasets, register the calc template's functions from a
zip, submit the job config.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from rltune.functions.archive import zip_workspace
from rltune.models.recipes import recipe_for
from rltune.models.tasks import make_dataset_rows, write_jsonl
from rltune.templates import TEMPLATES_DIR
from rltune.trainer.testing import QUICK_HYPER_PARAMETERS

TERMINAL = {"SUCCEEDED", "STOPPED", "FAILED", "CANCELED"}
IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"


class ServerProc:
    """A ``python -m rltune.server`` child process; ``stop()`` ends it and its jobs."""

    def __init__(self, proc: subprocess.Popen, url: str, key: str, home: Path):
        self.proc, self.url, self.key, self.home = proc, url, key, home
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=60
        )

    @classmethod
    def start(cls, home: Path, *, max_jobs: int = 2, timeout: float = 60) -> ServerProc:
        env = {**os.environ, "RLTUNE_HOME": str(home), "RLTUNE_TORCH_THREADS": "1"}
        log = open(home / "server-stdout.log", "wb")  # noqa: SIM115 (lives as long as the server)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rltune.server",
                "--port",
                "0",
                "--max-concurrent-jobs",
                str(max_jobs),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        info = home / "server" / "server.json"
        key_file = home / "server" / "admin.key"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited: {(home / 'server-stdout.log').read_text()}")
            if info.is_file() and key_file.is_file():
                url = json.loads(info.read_text())["url"]
                try:
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        return cls(proc, url, key_file.read_text().strip(), home)
                except httpx.HTTPError:
                    pass
            time.sleep(0.2)
        proc.kill()
        raise TimeoutError(f"server did not start in {timeout}s")

    def stop(self) -> None:
        self.http.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    # -------------------------------------------------------------- REST helpers

    def call(self, method: str, path: str, **kw: Any) -> Any:
        res = self.http.request(method, path, **kw)
        if res.status_code >= 400:
            raise AssertionError(f"{method} {path} -> {res.status_code}: {res.text}")
        return res.json()

    def job(self, job_id: str) -> dict[str, Any]:
        return self.call("GET", f"/v1/jobs/{job_id}")

    def wait(self, job_id: str, statuses: set[str], timeout: float = 300) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["status"] in statuses:
                return job
            if job["status"] in TERMINAL or time.monotonic() > deadline:
                log = self.call("GET", f"/v1/jobs/{job_id}/logs", params={"lines": 200})
                proc_log = self.call(
                    "GET", f"/v1/jobs/{job_id}/logs", params={"lines": 200, "source": "process"}
                )
                raise AssertionError(
                    f"job {job_id} is {job['status']}, wanted {statuses}: {job.get('error')}\n"
                    + "\n".join(log["logs"][-30:] + proc_log["logs"][-30:])
                )
            time.sleep(0.5)

    def wait_log_lines(self, job_id: str, n: int, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            res = self.call("GET", f"/v1/jobs/{job_id}/logs", params={"lines": 100000})
            if len(res["logs"]) >= n:
                return
            time.sleep(0.5)
        raise AssertionError(f"job {job_id} wrote fewer than {n} log lines in {timeout}s")


def upload(server: ServerProc, path: Path) -> str:
    res = server.call(
        "POST",
        "/v1/files",
        params={"filename": path.name, "purpose": "fine-tune"},
        content=path.read_bytes(),
        headers={"Content-Type": "application/octet-stream"},
    )
    return res["file_id"]


def register_calc_functions(server: ServerProc, work: Path) -> dict[str, str]:
    """Register the calc template's rollout and reward; returns {name: entity_id}."""
    ws = work / "calc-ws"
    if not ws.exists():
        shutil.copytree(TEMPLATES_DIR / "calc", ws, ignore=shutil.ignore_patterns("__pycache__"))
    archive = zip_workspace(ws, work / "calc.zip")
    ids = {}
    for name, ftype, classpath in (
        ("calc-rollout", "rollout", "functions/rollout.py:CalcRollout"),
        ("exact", "reward", "functions/reward.py:CalcReward"),
    ):
        res = server.call(
            "POST",
            "/v1/functions",
            params={"classpath": classpath, "type": ftype, "name": name},
            content=archive.path.read_bytes(),
            headers={"Content-Type": "application/octet-stream"},
        )
        ids[name] = res["entity_id"]
    return ids


def submit_calc_job(
    server: ServerProc,
    work: Path,
    model_dir: Path,
    *,
    name: str,
    train_rows: int = 8,
    val_rows: int = 4,
    top: dict[str, Any] | None = None,
    **hp: Any,
) -> str:
    """Submit the calc template job on ``model_dir`` through the REST API; returns the job id.
    ``top`` sets top-level keys of the job config (``model`` is ``model_dir`` unless given).

    The questions are those the demo models were warm-started on (``recipe_for("nano")``)."""
    work.mkdir(parents=True, exist_ok=True)
    task = recipe_for("nano").config.task
    rows = make_dataset_rows(train_rows, "train", seed=0, config=task)
    train = write_jsonl(rows, work / f"{name}-train.jsonl")
    val = write_jsonl(
        make_dataset_rows(val_rows, "heldout", seed=0, config=task), work / f"{name}-val.jsonl"
    )
    fn_ids = register_calc_functions(server, work)
    job = yaml.safe_load((TEMPLATES_DIR / "calc" / "job.yaml").read_text())
    job["name"] = name
    job["model"]["name"] = str(model_dir)
    job["datasets"] = [
        {"type": "training", "file_id": upload(server, train)},
        {"type": "validation", "file_id": upload(server, val)},
    ]
    for fn in job["functions"]:
        fn["entity_id"] = fn_ids[fn["name"]]
        fn.pop("fcmodel", None)
    job["training"]["hyper_parameters"].update({**QUICK_HYPER_PARAMETERS, **hp})
    job.update(top or {})  # top-level keys, e.g. tuned_model_name
    return server.call("POST", "/v1/jobs", json={"config": job})["job_id"]


# -------------------------------------------------------------- browser helpers


def login(page, server: ServerProc, key: str | None = None) -> None:
    page.goto(server.url + "/")
    page.fill("#api-key", key or server.key)
    page.click("#login-btn")
    if key is None:
        page.wait_for_selector("#workspace:has-text('workspace')")


def shot(page, name: str) -> None:
    """Screenshot the page; saved as <name>.png in ``$RLTUNE_CONSOLE_SCREENSHOTS`` when set
    (``RLTUNE_CONSOLE_SCREENSHOTS=docs/images`` retakes the README's), so a plain test run
    leaves the checkout clean."""
    png = page.screenshot(full_page=False)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    folder = os.environ.get("RLTUNE_CONSOLE_SCREENSHOTS")
    if folder:
        path = Path(folder)
        path = path if path.is_absolute() else IMAGES.parents[1] / path
        path.mkdir(parents=True, exist_ok=True)
        (path / f"{name}.png").write_bytes(png)
