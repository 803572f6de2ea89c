"""``rltune models publish|published|show|delete|deploy|deployments|stop|evaluate|export``:
the model lifecycle on the job server (the other ``models`` commands are local)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from rltune.cli.models_cmd import models_app
from rltune.cli.rl_common import KEY, OUT, Format, _client, _emit, _fail
from rltune.sdk.errors import RltuneError

MODEL = typer.Argument(..., help="a published model's name")


def register(app: typer.Typer) -> None:
    """The commands live on ``rltune models`` (attached at import)."""


def _run(fn: Any) -> Any:
    try:
        return fn()
    except (RltuneError, TimeoutError) as exc:
        _fail(exc)


@models_app.command("publish")
def publish(job_id: str = typer.Argument(..., help="the job (ft-…)"),
            name: str = typer.Option(..., "--name", "-n", help="the model's name"),
            checkpoint: str = typer.Option("best", "--checkpoint", "-c",
                                           help="a step number, best or last"),
            description: str = typer.Option("", "--description",
                                            help="free text kept with the model"),
            api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """Publish a job's checkpoint as a named model (jobs may then say `model: NAME`)."""
    ckpt: Any = int(checkpoint) if checkpoint.isdigit() else checkpoint
    _emit(_run(lambda: _client(api_key).publish_model(job_id, name, ckpt, description)),
          output, "published model")


@models_app.command("published")
def published(api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """List the published models of the workspace."""
    _emit(_run(lambda: _client(api_key).list_models()), output, "published models")


@models_app.command("show")
def show(name: str = MODEL, api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """A published model: source job, checkpoint, validation reward, base, files."""
    _emit(_run(lambda: _client(api_key).get_model(name)), output, name)


@models_app.command("delete")
def delete(name: str = MODEL, api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """Delete a published model (refused while a deployment serves it)."""
    _emit(_run(lambda: _client(api_key).delete_model(name)), output, name)


@models_app.command("export")
def export(name: str = MODEL, out: Path = typer.Option(..., "--out", help="a new folder"),
           adapter: bool = typer.Option(False, "--adapter",
                                        help="the LoRA adapter alone (peft format)"),
           api_key: Optional[str] = KEY) -> None:
    """Download a published model as a Hugging Face folder (merged), or its LoRA adapter;
    it streams to disk with a progress bar (on stderr)."""
    from rich.console import Console
    from rich.progress import DownloadColumn, Progress, TransferSpeedColumn

    with Progress(*Progress.get_default_columns(), DownloadColumn(), TransferSpeedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"export {name}", total=None)
        path = _run(lambda: _client(api_key).export_model(
            name, out, "adapter" if adapter else "merged",
            progress=lambda done, total: bar.update(task, completed=done, total=total)))
    typer.echo(str(path))


@models_app.command("push")
def push(name: str = MODEL, repo: str = typer.Option(..., "--repo", help="owner/name on the hub"),
         adapter: bool = typer.Option(False, "--adapter", help="the LoRA adapter alone"),
         public: bool = typer.Option(False, "--public", help="a public repository"),
         api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """Upload a published model to a Hugging Face hub (the server's HF_TOKEN, HF_ENDPOINT)."""
    _emit(_run(lambda: _client(api_key).push_model(name, repo, "adapter" if adapter
                                                   else "merged", not public)), output, name)


@models_app.command("deploy")
def deploy(names: list[str] = typer.Argument(..., help="published models to serve together"),
           name: str = typer.Option("", "--name", help="the deployment's name "
                                    "(default: from the models)"),
           threads: Optional[int] = typer.Option(
               None, "--threads", help="torch threads of the built-in engine (default 1)"),
           engine: str = typer.Option("builtin", "--engine", help="builtin, or vllm where "
                                      "the server has vLLM (one model per deployment)"),
           wait: bool = typer.Option(True, "--wait/--no-wait", help="wait until it serves"),
           api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """Serve published models on one OpenAI-compatible endpoint (routed by `model`)."""
    client = _client(api_key)
    dep = _run(lambda: client.deploy(names, name, threads, engine))
    if wait:
        dep = {**_run(lambda: client.wait_deployment(dep["deployment_id"])),
               "api_key": dep["api_key"]}
    _emit(dep, output, "deployment (the api_key is shown once)")


@models_app.command("deployments")
def deployments(api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """List deployments with their status and endpoint."""
    _emit(_run(lambda: _client(api_key).list_deployments()), output, "deployments")


@models_app.command("stop")
def stop(deployment_id: str = typer.Argument(..., help="the deployment (dep-…)"),
         api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """Stop a deployment's serving process."""
    _emit(_run(lambda: _client(api_key).stop_deployment(deployment_id)), output,
          deployment_id)


@models_app.command("evaluate")
def evaluate(job_id: str = typer.Argument(..., help="the job whose rollout, rewards and "
                                          "datasets are used"),
             models: list[str] = typer.Option(["base"], "--model", "-m",
                                              help="'base' or a published name; repeat"),
             dataset: str = typer.Option("validation", "--dataset",
                                         help="validation, training or a file id"),
             n: int = typer.Option(4, "-n", help="samples per prompt"),
             k: int = typer.Option(1, "-k", help="k of pass@k"),
             threshold: float = typer.Option(1.0, "--threshold",
                                             help="a sample passes when reward >= this"),
             api_key: Optional[str] = KEY, output: Format = OUT) -> None:
    """Evaluate models side by side (mean@1, pass@k, per prompt) without training."""
    client = _client(api_key)
    ev = _run(lambda: client.evaluate(job_id, models, dataset, n, k, threshold))
    done = _run(lambda: client.wait_evaluation(ev["evaluation_id"]))
    if output == "json":
        _emit(done, output)
        return
    rows = {m["model"]: {"mean@1": round(m["mean@1"], 4), "pass@k": round(m["pass@k"], 4)}
            for m in done["result"]["models"]}
    _emit({"evaluation_id": done["evaluation_id"], "n": n, "k": k, **rows}, output,
          "evaluation")
