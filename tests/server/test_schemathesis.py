"""The OpenAPI document against the live server, with schemathesis: every operation's success
body is typed (``rltune.server.schemas``), and generated requests get answers that match the
document (no 5xx, a documented status code and content type, a body of its schema).

Every JSON answer the server tests get through ``Server.client()`` is checked the same way
(conftest.py), so the success bodies of real files, jobs, models, deployments and evaluations are
checked too. The default run here tries every operation with a few examples; the ``slow`` run
tries more, with every phase."""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

pytest.importorskip("schemathesis")

CHECKS = ("not_a_server_error,status_code_conformance,content_type_conformance,"
          "response_schema_conformance")


def run_schemathesis(location: str, *args: str, cwd: Path, timeout: int = 900) -> None:
    """``schemathesis run`` with ``CHECKS``; fails the test with its report."""
    exe = shutil.which("schemathesis") or str(Path(sys.executable).parent / "schemathesis")
    proc = subprocess.run(
        [exe, "run", location, "--checks", CHECKS, "--seed", "1",
         "--workers", "1", "--generation-database", "none", *args],
        capture_output=True, text=True, timeout=timeout, cwd=cwd)
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-2000:]


def test_every_operation_has_a_typed_success_body_the_client_checks(server):
    spec = httpx.get(f"{server.url}/openapi.json").json()
    untyped = []
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            for code, answer in op["responses"].items():
                if not code.startswith("2"):
                    continue
                bodies = list((answer.get("content") or {}).values())
                schemas = [b.get("schema") or {} for b in bodies]
                if not schemas or any(not ("$ref" in s or s.get("format") == "binary"
                                           or s.get("type") == "string") for s in schemas):
                    untyped.append(f"{method.upper()} {path} {code}: {schemas}")
    assert not untyped, "\n".join(untyped)
    assert len(spec["paths"]) >= 40

    # and the test client (conftest.py) refuses an answer off the document
    request = httpx.Request("GET", f"{server.url}/v1/files/file-abc")

    def answer(status: int, body: dict) -> httpx.Response:
        out = httpx.Response(status, json=body, request=request)
        out.elapsed = timedelta(0)
        return out

    server.conforms(answer(404, {"error": {"code": "not_found", "message": "x"}, "status": 404}))
    with pytest.raises(AssertionError, match="does not match the OpenAPI document"):
        server.conforms(answer(200, {"file_id": "file-abc"}))
    with pytest.raises(AssertionError, match="does not match the OpenAPI document"):
        server.conforms(answer(404, {"detail": "Not Found"}))


def test_generated_requests_get_answers_of_the_document(server, tmp_path):
    run_schemathesis(f"{server.url}/openapi.json", "-H", f"Authorization: Bearer {server.key}",
                     "--max-examples", "3", "--phases", "examples,fuzzing",
                     "--exclude-path-regex", "logs/stream", "--request-timeout", "30",
                     cwd=tmp_path)


@pytest.mark.slow
def test_more_generated_requests_get_answers_of_the_document(server, tmp_path):
    run_schemathesis(f"{server.url}/openapi.json", "-H", f"Authorization: Bearer {server.key}",
                     "--max-examples", "25", "--exclude-path-regex", "logs/stream",
                     "--request-timeout", "60", cwd=tmp_path)
