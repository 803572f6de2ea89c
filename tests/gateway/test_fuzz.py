"""Schemathesis against a live policy gateway (``/v1/chat/completions`` and
``/v1/responses``, their request models as the schema): no request is answered with a 5xx.
The default run tries a few examples per route; ``-m slow`` many more, in every phase."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gateway.threaded import threaded_gateway  # tests/gateway/threaded.py

pytest.importorskip("schemathesis")
pytest.importorskip("torch")


def gateway_schema() -> dict:
    """An OpenAPI document of the gateway's POST routes, from their pydantic models."""
    from rltune.gateway.protocol import ChatCompletionRequest
    from rltune.gateway.responses import ResponsesRequest

    components: dict = {}

    def body(model: type) -> dict:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(schema.pop("$defs", {}))
        components[model.__name__] = schema
        return {"required": True, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}

    answers = {"200": {"description": "the completion"},
               "400": {"description": "a bad request"}}
    return {"openapi": "3.1.0", "info": {"title": "rltune gateway", "version": "1"},
            "paths": {"/v1/chat/completions": {"post": {
                          "requestBody": body(ChatCompletionRequest), "responses": answers}},
                      "/v1/responses": {"post": {
                          "requestBody": body(ResponsesRequest), "responses": answers}}},
            "components": {"schemas": components}}


@pytest.fixture(scope="module")
def live_gateway(tiny_model_dir):
    """A gateway on 127.0.0.1 (schemathesis runs in a subprocess)."""
    with threaded_gateway(tiny_model_dir, static_keys=("fuzz",)) as gw:
        yield gw


def _fuzz(gw, tmp_path: Path, *args: str) -> None:
    spec = tmp_path / "gateway.json"
    spec.write_text(json.dumps(gateway_schema()))
    exe = shutil.which("schemathesis") or str(Path(sys.executable).parent / "schemathesis")
    origin = gw.base_url.removesuffix("/v1")
    proc = subprocess.run(
        [exe, "run", str(spec), "--url", origin, "--checks", "not_a_server_error",
         "-H", "Authorization: Bearer fuzz", "--seed", "1", "--workers", "1",
         "--generation-database", "none", "--request-timeout", "120", *args],
        capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


def test_gateway_answers_no_5xx(live_gateway, tmp_path):
    _fuzz(live_gateway, tmp_path, "--max-examples", "10", "--phases", "examples,fuzzing")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_gateway_answers_no_5xx_long(live_gateway, tmp_path):
    """Every phase; generations of up to the model's context make it slow on a CPU: at most
    400 s of fuzzing (about 370 requests on the tiny model)."""
    _fuzz(live_gateway, tmp_path, "--max-examples", "100", "--max-time", "400")
