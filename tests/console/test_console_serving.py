"""The console as the job server serves it, and ``rltune console``: real server, real HTTP."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx


def test_root_serves_the_page_and_assets_without_shadowing_the_api(server):
    page = httpx.get(server.url + "/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert 'src="console/app.js"' in page.text
    app = httpx.get(server.url + "/console/app.js")
    assert app.status_code == 200 and "javascript" in app.headers["content-type"]
    assert app.headers["cache-control"] == "no-cache"
    for asset in ("style.css", "charts.js", "views/trajectories.js"):
        assert httpx.get(f"{server.url}/console/{asset}").status_code == 200, asset
    assert httpx.get(server.url + "/console/nope.js").status_code == 404
    # The API keeps its own answers: 401 without a key, JSON with one.
    assert httpx.get(server.url + "/v1/jobs").status_code == 401
    assert server.call("GET", "/v1/whoami")["workspace"] == "default"
    assert httpx.get(server.url + "/health").json()["status"] == "ok"


def _cli(*args: str, home) -> subprocess.CompletedProcess:
    env = {**os.environ, "RLTUNE_HOME": str(home)}
    env.pop("RLTUNE_BASE_URL", None)
    return subprocess.run(
        [sys.executable, "-m", "rltune.cli.main", "console", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_rltune_console_prints_the_page_of_the_local_server(server):
    res = _cli("--no-browser", "--show-key", home=server.home)
    assert res.returncode == 0, res.stderr
    assert f"rltune console: {server.url}/" in res.stdout
    assert f"API key: {server.key}" in res.stdout


def test_rltune_console_without_a_server_says_how_to_start_one(tmp_path):
    res = _cli("--no-browser", "--url", "http://127.0.0.1:9", home=tmp_path)
    assert res.returncode == 4  # rltune.cli.exit_codes.UNREACHABLE
    assert "no rltune server answers at http://127.0.0.1:9" in res.stderr
    assert "rltune server start" in res.stderr
