"""Where the server is and which key to use; start a local server when none answers.

Order: explicit argument > ``RLTUNE_BASE_URL`` / ``RLTUNE_API_KEY`` (then the cloud SDK's
``DASHSCOPE_API_KEY``) > the saved login (``$RLTUNE_HOME/login.json``, written by
``rltune ark login``) > the local server's ``$RLTUNE_HOME/server/server.json`` and
``admin.key`` > ``http://127.0.0.1:8600``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from rltune.paths import rltune_home, server_home
from rltune.sdk.errors import AuthError, RltuneError

DEFAULT_URL = "http://127.0.0.1:8600"
#: Where an API key is read from, in order (DASHSCOPE_API_KEY: code written for the cloud SDK).
KEY_VARS = ("RLTUNE_API_KEY", "DASHSCOPE_API_KEY")


def login_path() -> Path:
    """Where a saved login (server URL and API key) lives: ``$RLTUNE_HOME/login.json``."""
    return rltune_home() / "login.json"


def saved_login() -> dict:
    """The saved ``{"url", "api_key"}`` (empty when there is none or it cannot be read)."""
    try:
        data = json.loads(login_path().read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def save_login(url: str, key: str) -> Path:
    """Write the login file (mode 0600: it holds a key) and return its path."""
    path = login_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump({"url": url.rstrip("/"), "api_key": key}, fh)
    os.replace(tmp, path)
    return path


def local_server_info() -> Optional[dict]:
    try:
        return json.loads((server_home() / "server.json").read_text())
    except (OSError, json.JSONDecodeError):
        return None


def base_url(explicit: Optional[str] = None) -> str:
    if explicit:
        return explicit.rstrip("/")
    if os.environ.get("RLTUNE_BASE_URL"):
        return os.environ["RLTUNE_BASE_URL"].rstrip("/")
    if saved_login().get("url"):
        return str(saved_login()["url"]).rstrip("/")
    info = local_server_info()
    return (info or {}).get("url") or DEFAULT_URL


def api_key(explicit: Optional[str] = None, *, required: bool = True,
            url: Optional[str] = None) -> Optional[str]:
    """The key for the server at ``url`` (default: :func:`base_url`). The saved login's key is
    used only for the server it was saved with, never sent to another one."""
    if explicit:
        return explicit
    for var in KEY_VARS:
        if os.environ.get(var):
            return os.environ[var]
    login = saved_login()
    if login.get("api_key") and str(login.get("url", "")).rstrip("/") == (
            url or base_url()).rstrip("/"):
        return str(login["api_key"])
    path = server_home() / "admin.key"
    if path.is_file():
        return path.read_text().strip()
    if required:
        raise AuthError("no API key", where="RLTUNE_API_KEY",
                        hint="set RLTUNE_API_KEY, pass api_key=, run `rltune ark login`, or "
                             "start a local server "
                             "(`rltune server start`) whose admin key is picked up")
    return None


def is_up(url: str, timeout: float = 1.0) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/health", timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def start_local_server(port: int = 8600, host: str = "127.0.0.1", wait: float = 60.0,
                       extra_args: Optional[list[str]] = None) -> str:
    """Start ``python -m rltune.server`` detached; return its URL once /health answers."""
    server_dir = server_home()
    server_dir.mkdir(parents=True, exist_ok=True)
    info_path = server_dir / "server.json"
    info_path.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "rltune.server", "--host", host, "--port", str(port),
           *(extra_args or [])]
    with open(server_dir / "server.log", "ab") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = (server_dir / "server.log").read_text(errors="replace")[-800:]
            raise RltuneError(f"the server exited with code {proc.returncode}: {tail}",
                              where=str(server_dir / "server.log"),
                              hint="is the port in use? try --port")
        info = local_server_info()
        if info and info.get("pid") == proc.pid and is_up(info["url"]):
            return info["url"]
        time.sleep(0.2)
    raise RltuneError(f"the server did not answer within {wait:.0f}s",
                      where=str(server_dir / "server.log"), hint="see the log")
