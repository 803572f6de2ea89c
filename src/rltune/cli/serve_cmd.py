"""``rltune serve``: serve a saved model on an OpenAI-compatible endpoint (no capture).

Example::

    rltune serve nano --port 8000 --api-key sk-local
    # then: OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="sk-local")
    rltune serve ~/models/Qwen3-Coder-30B-A3B-Instruct --tool-parser qwen3_coder
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import typer


def resolve_model_path(spec: str) -> Path:
    """A model directory from a path or a name under ``$RLTUNE_HOME/models``."""
    path = Path(spec).expanduser()
    if (path / "config.json").is_file():
        return path
    home = Path(os.environ.get("RLTUNE_HOME", "~/.rltune")).expanduser()
    named = home / "models" / spec
    if (named / "config.json").is_file():
        return named
    known = sorted(p.name for p in (home / "models").glob("*") if (p / "config.json").is_file())
    from rltune.sdk.errors import NotFoundError

    raise NotFoundError(
        f"no model at {spec!r}: not a model directory, and not a name under {home / 'models'}",
        where="MODEL", hint=("known names: " + ", ".join(known)) if known else
        "pass a directory saved with save_pretrained, or build the demo model with "
        "`rltune models build-demo`")


DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
          "float16": "float16", "fp16": "float16", "half": "float16"}


def check_device_dtype(device: str, dtype: str) -> str:
    """The torch dtype name for ``dtype``; a ``ValidationError`` for a dtype that does not exist
    or a device this torch build cannot use."""
    from rltune.sdk.errors import ValidationError

    name = DTYPES.get(dtype.lower())
    if name is None:
        raise ValidationError(f"unknown dtype {dtype!r}", where="--dtype",
                              hint="use float32, bfloat16 (bf16) or float16 (fp16)")
    import torch

    kind = device.split(":")[0].lower()
    if kind == "cuda" and not torch.cuda.is_available():
        why = ("this torch build has no CUDA" if torch.version.cuda is None
               else "no CUDA device is visible")
        raise ValidationError(f"--device {device}: {why} (torch {torch.__version__})",
                              where="--device", hint="use --device cpu, or install a CUDA "
                              "build of torch on a machine with a GPU")
    if kind not in ("cpu", "cuda", "mps", "xpu"):
        raise ValidationError(f"unknown device {device!r}", where="--device",
                              hint="use cpu or cuda (cuda:N)")
    return name


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        model: str = typer.Argument(..., help="model directory, or a name under "
                                    "$RLTUNE_HOME/models"),
        host: str = typer.Option("127.0.0.1", help="interface to bind"),
        port: int = typer.Option(8000, help="port (0 picks a free one)"),
        api_key: Optional[str] = typer.Option(
            None, envvar="RLTUNE_SERVE_API_KEY",
            help="required bearer key; without one the endpoint is open (local use only)"),
        threads: int = typer.Option(2, help="torch threads"),
        max_batch_size: int = typer.Option(64, help="most sequences decoded together"),
        device: str = typer.Option("cpu", help="cpu or cuda"),
        dtype: str = typer.Option("float32", help="float32, bfloat16 (bf16) or float16 "
                                  "(fp16)"),
        served_name: Optional[str] = typer.Option(None, help="name shown in /v1/models"),
        tool_parser: Optional[str] = typer.Option(
            None, help="tool-call parser: hermes, llama3_json, mistral or qwen3_coder "
            "(default: from the model's config.json model_type)"),
    ) -> None:
        """Serve a saved model through rltune's gateway (OpenAI chat completions, tools)."""
        import asyncio

        from rltune.gateway.toolcalls import parser_name_for_model_dir
        from rltune.sdk.errors import RltuneError

        try:
            path = resolve_model_path(model)
            # an unknown parser or model family fails here, before the weights load
            parser = parser_name_for_model_dir(path, tool_parser)
            dtype = check_device_dtype(device, dtype)
        except RltuneError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        try:
            asyncio.run(_serve(path, host, port, api_key, threads, max_batch_size, device,
                               dtype, served_name, parser))
        except RltuneError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(1) from None


async def _serve(path: Path, host: str, port: int, api_key: Optional[str], threads: int,
                 max_batch_size: int, device: str, dtype: str,
                 served_name: Optional[str], tool_parser: Optional[str] = None) -> None:
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway.server import Gateway

    engine = TransformersEngine.from_pretrained(
        path, device=device, dtype=dtype, threads=threads, max_batch_size=max_batch_size,
        model_name=served_name or path.name)
    gw = await Gateway.start(engine, host=host, port=port,
                             static_keys=(api_key,) if api_key else (),
                             open_access=not api_key, tool_parser=tool_parser)
    auth = "bearer key required" if api_key else "open: no api key required"
    typer.echo(f"serving {gw.model_name} at {gw.base_url} ({auth})", err=False)
    try:
        await gw.wait()
    finally:
        await engine.close()
