"""A local stand-in for a Hugging Face hub's upload API (the true external edge of
``push_to_hub``): create a repo, pre-upload (every file "regular"), commit NDJSON with base64
contents. Files land under ``root/<owner>/<name>/``; only ``Bearer <token>`` is accepted."""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse


def make_app(root: Path, token: str) -> FastAPI:
    app = FastAPI()

    def refused(req: Request) -> bool:
        return req.headers.get("authorization") != f"Bearer {token}"

    def base(req: Request) -> str:
        return str(req.base_url).rstrip("/")

    @app.post("/api/repos/create")
    async def create(req: Request):
        if refused(req):
            return JSONResponse({"error": "Invalid credentials"}, 401)
        body = await req.json()
        repo = f"{body['organization']}/{body['name']}" if body.get("organization") \
            else body["name"]
        (root / repo).mkdir(parents=True, exist_ok=True)
        return {"url": f"{base(req)}/{repo}", "name": repo, "id": repo}

    @app.post("/api/models/{owner}/{name}/preupload/{rev}")
    async def preupload(owner: str, name: str, rev: str, req: Request):
        files = (await req.json())["files"]
        return {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                          for f in files]}

    @app.post("/api/models/{owner}/{name}/commit/{rev}")
    async def commit(owner: str, name: str, rev: str, req: Request):
        if refused(req):
            return JSONResponse({"error": "Invalid credentials"}, 401)
        for line in (await req.body()).decode().splitlines():
            item = json.loads(line) if line.strip() else {}
            if item.get("key") == "file":
                path = root / owner / name / item["value"]["path"]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(base64.b64decode(item["value"]["content"]))
        oid = "a" * 40
        return {"commitUrl": f"{base(req)}/{owner}/{name}/commit/{oid}", "commitOid": oid,
                "commitMessage": "", "pullRequestUrl": None}

    return app


def start(root: Path, token: str) -> tuple[str, uvicorn.Server]:
    server = uvicorn.Server(uvicorn.Config(make_app(root, token), host="127.0.0.1", port=0,
                                           log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    return f"http://127.0.0.1:{port}", server
