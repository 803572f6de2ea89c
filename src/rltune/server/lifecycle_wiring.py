"""Hooks the model lifecycle into the server: the deployment manager and the end-of-job
publishing of ``tuned_model_name`` (one place, so ``app.py`` changes by two lines)."""

from __future__ import annotations

import functools
from typing import Any

from rltune.server.context import ServerContext


def attach_lifecycle(app: Any, ctx: ServerContext) -> Any:
    """Create the deployment manager (``app.state.deployments``) and the publish hook."""
    from rltune.server.deployments import DeploymentManager
    from rltune.server.evaluations import EvaluationRunner
    from rltune.server.published import auto_publish

    ctx.executor.on_success.append(functools.partial(
        auto_publish, ctx.store, ctx.settings.home, ctx.settings.jobs_dir))
    app.state.deployments = DeploymentManager(ctx.store, ctx.settings.server_dir / "deployments")
    app.state.evaluations = EvaluationRunner(ctx.store, ctx.settings.server_dir / "evaluations")
    return _Both(app.state.deployments, app.state.evaluations)


class _Both:
    def __init__(self, *managers: Any):
        self.managers = managers

    async def start(self) -> None:
        for m in self.managers:
            await m.start()

    async def stop(self) -> None:
        for m in self.managers:
            await m.stop()
