"""TRL's ``callbacks=[...]``: ``transformers.TrainerCallback`` hooks called from rltune's steps.

``on_train_begin``, ``on_step_end``, ``on_log`` (every ``logging_steps`` steps, and the last
one) and ``on_train_end`` are called with ``(args, state, control, **kwargs)``, ``state``
a ``transformers.TrainerState`` (``global_step``, ``max_steps``, ``log_history``). The logs
carry TRL's names for the metrics TRL logs (``reward``, ``rewards/<function>/mean``, ``loss``
…, from ``rltune.observability.vocab``) next to every rltune metric of the step.
"""

from __future__ import annotations

from typing import Any, Optional


def trl_logs(metrics: dict[str, Any]) -> dict[str, Any]:
    """One step's metrics with TRL's names first (``rltune.observability.vocab``)."""
    from rltune.observability.vocab import aliases

    return {**aliases(metrics, ["trl"]), **metrics}


class _Sink:
    """The job's sink, remembering each step's metrics for the callbacks."""

    def __init__(self, inner: Any, seen: dict[int, dict[str, Any]]):
        self._inner, self._seen = inner, seen

    def metrics(self, step: int, values: dict[str, float]) -> None:
        self._seen.setdefault(step, {}).update(values)
        self._inner.metrics(step, values)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class CallbackRelay:
    def __init__(self, callbacks: list[Any], args: Any):
        from transformers import TrainerControl, TrainerState

        self.callbacks, self.args = callbacks, args
        self.state, self.control = TrainerState(), TrainerControl()
        self._metrics: dict[int, dict[str, Any]] = {}

    def wrap(self, sink: Any) -> Any:
        return _Sink(sink, self._metrics)

    def _call(self, hook: str, **kwargs: Any) -> None:
        for cb in self.callbacks:
            fn = getattr(cb, hook, None)
            if fn is not None:
                fn(self.args, self.state, self.control, **kwargs)

    def begin(self, total_steps: int) -> None:
        self.state.max_steps = total_steps
        self.state.logging_steps = int(self.args.logging_steps or 1)
        self._call("on_train_begin")

    def on_progress(self, progress: dict[str, Any]) -> None:
        """The trainer's per-step report: step end, then the log when it is due."""
        step = int(progress.get("step") or 0)
        if progress.get("state") != "running" or step <= self.state.global_step:
            return
        self.state.global_step = step
        self.state.epoch = step / max(self.state.max_steps, 1)
        self._call("on_step_end")
        every = int(self.args.logging_steps or 1)
        if step % every == 0 or step == self.state.max_steps:
            self.log(step)

    def log(self, step: int, metrics: Optional[dict[str, Any]] = None) -> None:
        logs = trl_logs(metrics or self._metrics.get(step, {}))
        logs = {**logs, "step": step}
        self.state.log_history.append(logs)
        self._call("on_log", logs=logs)

    def end(self) -> None:
        self._call("on_train_end")
