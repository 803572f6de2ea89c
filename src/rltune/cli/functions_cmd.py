"""``rltune functions …`` and ``rltune test-functions``: serve, package, register, load, test.

Examples::

    rltune functions serve --type reward --classpath functions.reward.Calc --port 8000
    rltune test-functions -c functions.reward.Calc --type reward -i resources/reward_input.json
    rltune test-functions --rollout functions.rollout.Calc --reward functions.reward.Calc \\
        --data data/val.jsonl -n 8 --base-url http://127.0.0.1:8000/v1 --model policy
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Optional

import typer

from rltune.cli.rl_common import OUT, Format
from rltune.sdk.errors import RltuneError

functions_app = typer.Typer(help="Run, package, register and test rollout/reward functions.",
                            no_args_is_help=True)
TYPES = "rollout|reward|group_reward"


def _fail(exc: Exception) -> None:
    typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
    raise typer.Exit(2)


def _read_input(text: str) -> dict:
    path = Path(text)
    source = "--input"
    if not text.lstrip().startswith(("{", "[")) and path.is_file():
        text, source = path.read_text(encoding="utf-8"), str(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        from rltune.sdk.errors import ValidationError

        raise ValidationError(f"input is not JSON: {exc.msg} (line {exc.lineno}, column "
                              f"{exc.colno})", where=source,
                              hint="pass a JSON object or the path of a .json file") from None
    if not isinstance(data, dict):
        from rltune.sdk.errors import ValidationError

        raise ValidationError("input must be a JSON object", where=source)
    return data


def _infer_type(classpath: str, workspace: Path) -> str:
    from rltune.sdk.loader import load_processor_class

    declared = getattr(load_processor_class(classpath, workspace), "func_type", None)
    return declared.value if declared is not None else "rollout"


@functions_app.command("serve")
def serve(
    classpath: str = typer.Option(..., "--classpath", "-c", envvar="PROCESSOR_CLASS",
                                help="the processor class, module.Class"),
    func_type: str = typer.Option(..., "--type", "-t", envvar="FUNC_TYPE", help=TYPES),
    workspace: Path = typer.Option(Path("."), "--workspace", "-w",
                                   help="the folder the classpath is imported from"),
    host: str = typer.Option("127.0.0.1", help="interface to bind"),
    port: int = typer.Option(8000, envvar="SERVER_PORT", help="0 picks a free port"),
    concurrency: int = typer.Option(32, envvar="THREAD_POOL_WORKERS",
                                    help="calls run at once"),
    queue_size: int = typer.Option(100, envvar="THREAD_POOL_QUEUE",
                                   help="calls waiting before new ones are refused (503)"),
    timeout: Optional[float] = typer.Option(None, help="seconds per call"),
    build_venv: bool = typer.Option(False, help="build a venv for requirements.txt first"),
) -> None:
    """Serve one processor on POST /api/v1 and GET /health (like the cloud function)."""
    import os

    args = ["--func-type", func_type, "--classpath", classpath, "--workspace", str(workspace),
            "--host", host, "--port", str(port), "--concurrency", str(concurrency),
            "--queue-size", str(queue_size)] + (["--timeout", str(timeout)] if timeout else [])
    if build_venv:
        from rltune.functions.requirements import ensure_venv
        from rltune.paths import functions_home

        try:
            python = ensure_venv(workspace, functions_home() / "venvs")
        except RltuneError as exc:
            _fail(exc)
        os.execv(str(python), [str(python), "-m", "rltune.functions.worker", *args])
    from rltune.functions.worker import main

    raise typer.Exit(main(args))


@functions_app.command("package")
def package(workspace: Path = typer.Argument(Path("."), help="the folder to zip"),
            output: Path = typer.Option(Path("workspace.zip"), "--out", "--output",
                                        help="the zip to write")) -> None:
    """Zip a workspace (cloud exclusions + .gitignore) and print its content hash."""
    from rltune.functions.archive import zip_workspace

    try:
        arc = zip_workspace(workspace, output)
    except RltuneError as exc:
        _fail(exc)
    typer.echo(f"{arc.path}  sha256={arc.sha256}  {arc.size} bytes  {len(arc.files)} files")


@functions_app.command("register")
def register_fn(
    classpath: str = typer.Option(..., "--classpath", "-c",
                                  help="the function class, module.Class"),
    func_type: str = typer.Option(..., "--type", "-t", help=TYPES),
    workspace: Path = typer.Option(Path("."), "--workspace", "-w",
                                   help="the folder the classpath is imported from"),
    name: Optional[str] = typer.Option(None, help="a name for it (default: the classpath)"),
) -> None:
    """Register a function; prints its entity id (ro-…, rw-…, grw-…)."""
    from rltune.functions.registry import FunctionRegistry

    try:
        entity = FunctionRegistry().register(classpath, func_type, workspace, name)
    except RltuneError as exc:
        _fail(exc)
    typer.echo(entity.entity_id)


@functions_app.command("list")
def list_fn(output: Format = OUT) -> None:
    """List registered functions and instances."""
    from rltune.functions.registry import FunctionRegistry
    from rltune.functions.render import render

    reg = FunctionRegistry()
    data = {"functions": [{"id": e.entity_id, "type": e.func_type.value, "name": e.name,
                           "classpath": e.classpath, "sha256": e.archive_sha256[:12]}
                          for e in reg.list()],
            "instances": [{"id": i.instance_id, "entity": i.entity_id, "url": i.url,
                           "status": i.status} for i in reg.list_instances()]}
    typer.echo(render(data, output))


@functions_app.command("load")
def load_fn(
    entity_id: str = typer.Argument(..., help="the registered function (ro-…, rw-…, grw-…)"),
    port: int = typer.Option(0, help="instance port (0 picks a free one)"),
    concurrency: Optional[int] = typer.Option(None, help="calls per worker at once "
                                              "(default: the function's runtime)"),
    capacity: Optional[int] = typer.Option(None, help="workers started up front "
                                           "(default: the function's runtime)"),
    max_capacity: Optional[int] = typer.Option(None, help="most workers when scaling out "
                                               "(default: the function's runtime)"),
    memory_size: Optional[int] = typer.Option(None, help="MB per worker"),
    timeout: Optional[float] = typer.Option(None, help="seconds per call"),
) -> None:
    """Load a registered function as an instance (pool + URL) until Ctrl-C."""
    from rltune.functions.front import run_instance
    from rltune.functions.registry import FunctionRegistry

    runtime = {k: v for k, v in {"concurrency": concurrency, "capacity": capacity,
                                 "max_capacity": max_capacity,
                                 "memory_size": memory_size}.items() if v is not None}

    async def run() -> None:
        reg = FunctionRegistry()
        spec = reg.spec_for(entity_id, runtime, timeout)
        async with run_instance(spec, port=port) as (_pool, url):
            instance = reg.record_instance(entity_id, url, spec.runtime, timeout)
            try:
                typer.echo(f"{instance.instance_id} {instance.trigger_url}")
                sys.stdout.flush()
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):  # stop cleanly: workers, record
                    loop.add_signal_handler(sig, stop.set)
                await stop.wait()
            finally:
                reg.mark_stopped(instance.instance_id)

    try:
        asyncio.run(run())
    except RltuneError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        pass


def test_functions(
    instance_id: Optional[str] = typer.Argument(
        None, help="a function instance registered on the rltune server (as the cloud CLI's "
                   "`test_functions INSTANCE_ID`; output defaults to json)"),
    classpath: Optional[str] = typer.Option(None, "--classpath", "-c",
                                            help="single mode: the processor to run"),
    instance: Optional[str] = typer.Option(None, "--instance",
                                           help="single mode: a loaded instance id or URL"),
    func_type: Optional[str] = typer.Option(None, "--type", "-t", help=TYPES),
    input_json: Optional[str] = typer.Option(None, "--input", "-i", help="JSON or a file"),
    rollout: Optional[str] = typer.Option(None, "--rollout", help="dataset mode: rollout"),
    reward: list[str] = typer.Option(
        [], "--reward", help="reward CLASSPATH[=WEIGHT][@METRIC=W,...] (@: reward_metric_weight)"),
    group_reward: list[str] = typer.Option(
        [], "--group-reward", help="group reward CLASSPATH[=WEIGHT][@METRIC=W,...]"),
    data: Optional[Path] = typer.Option(None, "--data", "-d", help="JSONL prompts"),
    n: int = typer.Option(4, "-n", help="rollouts per prompt"),
    limit: Optional[int] = typer.Option(None, help="use the first N prompts"),
    concurrency: int = typer.Option(16, help="rollouts in flight"),
    base_url: str = typer.Option("http://127.0.0.1:8000/v1", envvar="OPENAI_BASE_URL",
                                 help="the OpenAI-compatible endpoint a rollout calls"),
    model: str = typer.Option("policy", envvar="RLTUNE_MODEL",
                              help="model name sent to that endpoint"),
    api_key: str = typer.Option("EMPTY", envvar="OPENAI_API_KEY",
                                help="bearer key for that endpoint"),
    temperature: float = typer.Option(1.0, help="sampling temperature"),
    max_tokens: int = typer.Option(512, help="most new tokens per completion"),
    timeout: Optional[float] = typer.Option(None, help="seconds per call"),
    workspace: Path = typer.Option(Path("."), "--workspace", "-w",
                                   help="the folder the classpaths are imported from"),
    output: Optional[Format] = typer.Option(None, "--output", "-o", "--output-format",
                                            help="output format (default table; json with "
                                                 "INSTANCE_ID)"),
) -> None:
    """Run functions locally: one input (-c/--instance + -i) or a dataset (--rollout + --data);
    with INSTANCE_ID, send the input to that instance on the rltune server (`rltune rl
    test_functions`)."""
    from rltune.functions import harness
    from rltune.functions.render import render, render_report

    if instance_id is not None:
        from rltune.cli.rl_cmd import test_functions as server_test

        if input_json is None:
            _fail(RltuneError("INSTANCE_ID needs an input", hint="add -i INPUT.json"))
        key = None if api_key == "EMPTY" else api_key  # the server's key (else env / admin)
        return server_test(instance_id=instance_id, func_type=func_type,
                           input_json=input_json, api_key=key, output=output or Format.json)
    output = output or Format.table

    try:
        if rollout or data:
            if not (rollout and data):
                raise typer.BadParameter("dataset mode needs both --rollout and --data")
            from rltune.config.data import load_dataset
            from rltune.rollout.harness import ModelEndpoint

            rows = load_dataset(data)[:limit] if limit else load_dataset(data)
            refs = [_reward_ref(r, "reward") for r in reward] + [
                _reward_ref(r, "group_reward") for r in group_reward]
            report = asyncio.run(_run_dataset_with_progress(
                rows, rollout, refs, n, concurrency, workspace, timeout,
                ModelEndpoint(base_url=base_url, model=model, api_key=api_key),
                {"temperature": temperature, "max_tokens": max_tokens}))
            typer.echo(render_report(report, output))
            return
        if not (classpath or instance) or input_json is None:
            raise typer.BadParameter("give -c CLASSPATH or --instance ID with -i INPUT, or "
                                     "--rollout with --data")
        payload = _read_input(input_json)
        url = None
        if instance:
            from rltune.functions.registry import FunctionRegistry

            if instance.startswith("http"):
                url = instance
            else:
                inst = FunctionRegistry().get_instance(instance)
                url, func_type = inst.url, func_type or inst.func_type.value
        elif not func_type and "func_type" not in payload:
            func_type = _infer_type(classpath, workspace)
        out = asyncio.run(harness.run_single(payload, classpath=classpath, func_type=func_type,
                                             workspace=workspace, instance_url=url,
                                             timeout=timeout))
        typer.echo(render(out.model_dump(mode="json"), output, title=type(out).__name__))
        if out.status.value != "success":
            raise typer.Exit(1)
    except RltuneError as exc:
        _fail(exc)


def _reward_ref(text: str, func_type: str):
    """``CLASSPATH[=WEIGHT][@METRIC=W,...]``: the weight and ``reward_metric_weight`` of a job."""
    from rltune.rollout.harness import RewardRef

    head, _, metrics = text.partition("@")
    cp, _, weight = head.partition("=")
    try:
        metric_weights = None
        if metrics:
            pairs = [item.partition("=") for item in metrics.split(",")]
            if any(not m or not sep for m, sep, _ in pairs):
                raise ValueError
            metric_weights = {m.strip(): float(w) for m, _, w in pairs}
        return RewardRef(classpath=cp, func_type=func_type, weight=float(weight or 1.0),
                         metric_weights=metric_weights)
    except ValueError:
        raise typer.BadParameter(
            f"{text!r}: write CLASSPATH[=WEIGHT][@METRIC=W,...], e.g. "
            "functions/reward.py:Exact=2@acc=0.8,fmt=0.2 (weights are numbers)") from None


async def _run_dataset_with_progress(rows, rollout, refs, n, concurrency, workspace, timeout,
                                     endpoint, sampling):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from rltune.rollout.harness import run_dataset

    with Progress("[progress.description]{task.description}", BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), transient=True) as bar:
        task = bar.add_task("rollouts", total=len(rows) * n)
        return await run_dataset(
            rows, rollout=rollout, rewards=refs, n=n, concurrency=concurrency, model=endpoint,
            workspace=workspace, timeout=timeout, sampling_params=sampling,
            on_progress=lambda done, total: bar.update(task, completed=done))


def register(app: typer.Typer) -> None:
    """Add ``functions`` and the top-level ``test-functions`` to the rltune CLI."""
    functions_app.command("test")(test_functions)
    app.add_typer(functions_app, name="functions")
    app.command("test-functions")(test_functions)
    app.command("test_functions", hidden=True)(test_functions)
