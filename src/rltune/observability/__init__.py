"""Experiment trackers and traces of a training job (docs/observability.md).

* ``session.JobObservability``: what ``Trainer.run`` opens: trackers + tracing for one run;
* ``trackers/``: TensorBoard, W&B, MLflow, SwanLab, trackio (each an optional extra);
* ``tracing``: the tracer provider of each process and its exporter (OTLP or the job dir);
* ``spans``: the step / rollout / reward / generate spans and the headers that carry them;

The ``ENABLE_TRAJECTORY`` switch is ``rltune.config.switches.trajectories_enabled``.
"""
