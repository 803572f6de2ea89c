"""Push a published model to a Hugging Face hub (``push_to_hub``), when a token is configured.

The job server pushes with its own ``HF_TOKEN`` (and ``HF_ENDPOINT`` for a self-hosted hub) in
a child process (``python -m rltune.lifecycle.hub``), so the server's offline defaults and a
slow upload never touch its event loop. ``part`` is ``merged`` (a Hugging Face folder) or
``adapter`` (LoRA only), as in ``export``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Optional

from rltune._process import die_with_parent
from rltune.sdk.errors import ConfigError, FunctionCallError

PUSH_TIMEOUT_S = 1800.0


def hub_token() -> Optional[str]:
    return os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")


def push(model_dir: str, repo_id: str, part: str, private: bool) -> str:
    """Create ``repo_id`` (if new) and upload ``part`` of the model; the commit URL."""
    from huggingface_hub import HfApi

    from rltune.lifecycle.export import export_dir

    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None, token=hub_token())
    with tempfile.TemporaryDirectory(prefix="rltune-push-") as tmp:
        folder = export_dir(model_dir, Path(tmp) / "model", part)
        api.create_repo(repo_id, exist_ok=True, private=private)
        info = api.upload_folder(folder_path=str(folder), repo_id=repo_id,
                                 commit_message=f"rltune: {part} model")
    return str(getattr(info, "commit_url", info))


async def push_in_subprocess(model_dir: str, repo_id: str, part: str, private: bool) -> str:
    if not hub_token():
        raise ConfigError("no hub token is configured on the server", where="HF_TOKEN",
                          hint="start the server with HF_TOKEN set (and HF_ENDPOINT for a "
                               "self-hosted hub)")
    # rltune runs offline by default; this child is the one explicit request to go online
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "rltune.lifecycle.hub",
        json.dumps({"model_dir": model_dir, "repo_id": repo_id, "part": part,
                    "private": private}),
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        preexec_fn=die_with_parent())  # a push does not outlive the server that started it
    try:
        out, err = await asyncio.wait_for(proc.communicate(), PUSH_TIMEOUT_S)
    except asyncio.TimeoutError:
        proc.kill()
        raise FunctionCallError(f"the push to {repo_id} took over {PUSH_TIMEOUT_S:.0f} s",
                                where=repo_id, hint="retry, or export and upload by hand") \
            from None
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise FunctionCallError(f"the push to {repo_id} failed: {tail[0]}", where=repo_id,
                                hint="check HF_TOKEN, HF_ENDPOINT and the repository id")
    return out.decode().strip().splitlines()[-1]


def main(argv: Optional[list[str]] = None) -> int:
    args = json.loads((argv if argv is not None else sys.argv[1:])[0])
    print(push(args["model_dir"], args["repo_id"], args["part"], bool(args["private"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
