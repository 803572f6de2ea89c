"""``GRPOTrainer``: TRL's constructor and methods over rltune's pipeline.

``train()`` writes the job's workspace (``rltune.trl.workspace``) under ``args.output_dir``
and runs it in this process with rltune's trainer, as ``rltune train`` does: rollouts
through the policy gateway, the reward functions in worker processes, the update, the
checkpoints. Every argument that cannot be honoured is named in one ``ConfigError`` when the
trainer is built, before anything loads.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from rltune.sdk.errors import ConfigError
from rltune.trl import workspace
from rltune.trl.callbacks import CallbackRelay
from rltune.trl.config import GRPOConfig

#: ``peft.LoraConfig`` attribute → rltune hyper-parameter.
_LORA = {"r": "lora_rank", "lora_alpha": "lora_alpha", "lora_dropout": "lora_dropout",
         "target_modules": "lora_target_modules"}


class GRPOTrainer:
    """``GRPOTrainer(model=..., reward_funcs=..., args=GRPOConfig(...), train_dataset=...)``."""

    def __init__(self, model: Any, reward_funcs: Any = None, args: Optional[GRPOConfig] = None,
                 train_dataset: Any = None, eval_dataset: Any = None,
                 processing_class: Any = None, reward_processing_classes: Any = None,
                 callbacks: Optional[list[Any]] = None, optimizers: Any = (None, None),
                 quantization_config: Any = None, peft_config: Any = None,
                 tools: Optional[list[Callable[..., Any]]] = None, rollout_func: Any = None,
                 environment_factory: Any = None):
        problems: list[tuple[str, str]] = []
        if args is None:
            args = GRPOConfig(output_dir=_default_output_dir(model))
        elif not isinstance(args, GRPOConfig):
            problems.append(("args", f"is a {type(args).__name__}; build it with "
                             "rltune.trl.GRPOConfig (TRL's field names)"))
        unsupported = {
            "reward_processing_classes": (reward_processing_classes, "a reward model's "
                                          "tokenizer is the one saved with it"),
            "optimizers": (None if optimizers in ((None, None), None) else optimizers,
                           "rltune builds AdamW from learning_rate, weight_decay and "
                           "lr_scheduler_type"),
            "quantization_config": (quantization_config, "rltune trains full precision or "
                                    "LoRA (peft_config)"),
            "rollout_func": (rollout_func, _ROLLOUT_FUNC),
            "processing_class": (processing_class if isinstance(model, str) else None,
                                 "the tokenizer is the one saved with the model"),
        }
        problems += [(k, why) for k, (v, why) in unsupported.items() if v is not None]
        self.args = args
        self.model = model
        self.processing_class = processing_class
        self.train_rows = workspace.dataset_rows(train_dataset, "train_dataset")
        self.eval_rows = workspace.dataset_rows(eval_dataset, "eval_dataset")
        if not self.train_rows:
            problems.append(("train_dataset", "is empty or missing; rltune trains on rows"))
        self.environment, env_tools, env_reward = _environment(environment_factory, problems)
        self.reward_funcs = self._rewards(reward_funcs, problems, env_reward is not None)
        self.tools = list(tools or [])
        self.schemas = self._schemas([*self.tools, *env_tools], problems)
        self.lora = self._lora(peft_config, problems)
        weights = getattr(args, "reward_weights", None) if isinstance(args, GRPOConfig) else None
        if weights is not None and len(weights) != len(self.reward_funcs):
            problems.append(("reward_weights", f"{len(weights)} weight(s) for "
                             f"{len(self.reward_funcs)} reward function(s)"))
        self.reward_weights = list(weights) if weights else [1.0] * len(self.reward_funcs)
        if env_reward is not None:  # the environment's get_reward: weight 1, as in TRL
            self.reward_funcs.append(env_reward)
            self.reward_weights.append(1.0)
        if problems:
            raise ConfigError(
                f"GRPOTrainer: {len(problems)} argument(s) cannot be honoured: "
                + "; ".join(f"{name}: {why}" for name, why in problems),
                where="GRPOTrainer", hint="remove them, or use what each names")
        self.callbacks = list(callbacks or [])
        self.relay: Optional[CallbackRelay] = None  # built by train() (transformers loads)
        self.summary: Optional[dict[str, Any]] = None
        self._runtime: Any = None

    # ------------------------------------------------------------------ construction

    def _rewards(self, funcs: Any, problems: list[tuple[str, str]],
                 env_reward: bool = False) -> list[Any]:
        from rltune.trl.worker import RewardModel

        funcs = [] if funcs is None else funcs if isinstance(funcs, (list, tuple)) else [funcs]
        out: list[Any] = []
        for i, fn in enumerate(funcs):
            if isinstance(fn, (str, os.PathLike)):
                path = _local_model(str(fn))
                if path is None:
                    problems.append((f"reward_funcs[{i}]", f"{fn!r} is neither a model folder "
                                     "nor a downloaded hub model; download it first "
                                     f"(huggingface-cli download {fn}) or give its folder"))
                    continue
                out.append(RewardModel(path))
            elif hasattr(fn, "save_pretrained"):
                problems.append((f"reward_funcs[{i}]", "is a model object; save it "
                                 "(model.save_pretrained(dir)) and pass the folder"))
            elif callable(fn):
                out.append(fn)
            else:
                problems.append((f"reward_funcs[{i}]", f"is a {type(fn).__name__}; pass a "
                                 "function, a model folder or a hub id"))
        if not funcs and not env_reward:
            problems.append(("reward_funcs", "none given; pass at least one reward function "
                             "(or an environment_factory whose class defines get_reward)"))
        return out

    def _schemas(self, tools: list[Any], problems: list[tuple[str, str]]
                 ) -> list[dict[str, Any]]:
        """The tools' JSON schemas (from type hints and docstrings, as TRL builds them)."""
        if not tools:
            return []
        from transformers.utils import get_json_schema

        out = []
        for tool in tools:
            try:
                out.append(get_json_schema(tool))
            except Exception as exc:
                problems.append((f"tools[{getattr(tool, '__name__', tool)}]",
                                 f"{type(exc).__name__}: {exc}"))
        return out

    def _lora(self, peft_config: Any, problems: list[tuple[str, str]]) -> dict[str, Any]:
        if peft_config is None:
            return {}
        if type(peft_config).__name__ != "LoraConfig":
            problems.append(("peft_config", f"{type(peft_config).__name__}: rltune trains "
                             "LoRA adapters only (peft.LoraConfig)"))
            return {}
        out = {key: getattr(peft_config, attr) for attr, key in _LORA.items()
               if getattr(peft_config, attr, None) is not None}
        if isinstance(out.get("lora_target_modules"), set):
            out["lora_target_modules"] = sorted(out["lora_target_modules"])
        return out

    # ------------------------------------------------------------------ the job

    @property
    def state(self) -> Any:
        """``transformers.TrainerState`` of the run (``global_step``, ``log_history``)."""
        if self.relay is None:
            raise AttributeError("state: call train() first")
        return self.relay.state

    @property
    def output_dir(self) -> Path:
        return Path(self.args.output_dir or "trainer_output").resolve()

    def job_config(self) -> dict[str, Any]:
        """Write the workspace and return the job (the dict ``job.yaml`` holds)."""
        from rltune.config.yaml_io import dump_yaml

        ws = self.output_dir / "workspace"
        ws.mkdir(parents=True, exist_ok=True)
        functions = workspace.write_workspace(
            ws, rewards=self.reward_funcs, weights=self.reward_weights,
            standard=workspace.is_standard(self.train_rows), tools=self.tools,
            schemas=self.schemas, environment=self.environment,
            max_iterations=int(self.args.max_tool_calling_iterations or 8))
        datasets = [{"type": "training", "file_name": workspace.write_rows(
            self.train_rows, ws / "train.jsonl", "train_dataset")}]
        if self.eval_rows and self.args.eval_strategy != "no":
            datasets.append({"type": "validation", "file_name": workspace.write_rows(
                self.eval_rows, ws / "eval.jsonl", "eval_dataset")})
        job: dict[str, Any] = {
            "name": self.args.run_name or "trl-grpo",
            "model": {"name": self._model_path(ws)},
            "functions": functions, "datasets": datasets,
            "training": {"type": "reinforcement",
                         "hyper_parameters": {"algorithm": "grpo",
                                              **self.args.hyper_parameters(), **self.lora}}}
        if self.args.trackers():
            job["observability"] = {"trackers": [{"type": t} for t in self.args.trackers()]}
        (ws / "job.yaml").write_text(dump_yaml(job))
        return job

    def _model_path(self, ws: Path) -> str:
        if isinstance(self.model, (str, os.PathLike)):
            return str(self.model)
        target = ws / "model"
        self.model.save_pretrained(target)
        tok = self.processing_class
        if tok is None:
            from transformers import AutoTokenizer

            tok = AutoTokenizer.from_pretrained(self.model.name_or_path)
        tok.save_pretrained(target)
        return str(target)

    def train(self, resume_from_checkpoint: Optional[str] = None) -> dict[str, Any]:
        """Train (in this process); returns rltune's summary of the run."""
        from rltune.config.job import JobConfig

        job = JobConfig.model_validate(self.job_config())
        coro = self._run(job, resume_from_checkpoint)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.summary = asyncio.run(coro)
        else:  # called from a running loop (a notebook): run on a thread of its own
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(1) as pool:
                self.summary = pool.submit(asyncio.run, coro).result()
        return self.summary

    async def _run(self, job: Any, resume: Optional[str]) -> dict[str, Any]:
        from rltune.functions.output import JOB_LOG_ENV
        from rltune.jobdir import JobDir
        from rltune.trainer.loop import Trainer
        from rltune.trainer.sink import build_sink

        job_dir = self.output_dir
        self.relay = relay = CallbackRelay(self.callbacks, self.args)
        sink = relay.wrap(build_sink(job_dir, job))
        os.environ[JOB_LOG_ENV] = str(JobDir(job_dir).log)  # workers append their output there
        try:
            trainer = Trainer(job, job_dir=job_dir, base_dir=self.output_dir / "workspace",
                              sink=sink, progress=relay.on_progress,
                              functions_as_user=True)
            relay.begin(trainer.total_steps)
            summary = await trainer.run(resume_from=resume)
            self._runtime = trainer.rt
            relay.end()
        finally:
            sink.close()
        if self.args.push_to_hub:
            self.push_to_hub()
        return summary

    def submit(self, base_url: Optional[str] = None, api_key: Optional[str] = None,
               wait: bool = False) -> str:
        """Submit the job to an rltune job server instead of training here: the workspace
        (functions, pickled) is uploaded as each function's archive and the rows as files.
        ``base_url`` / ``api_key``: the server (unset: as ``rltune run`` finds it). Returns
        the job id; ``wait=True`` returns when the job has ended."""
        from rltune.client.agentic_rl import AgenticRL, run_sync

        self.job_config()
        client = AgenticRL(api_key=api_key, base_url=base_url)
        client.init(self.output_dir / "workspace" / "job.yaml")
        job_id = str(run_sync(client.run()).output.job_id)
        if wait:
            run_sync(client.wait(job_id))
        return job_id

    # ------------------------------------------------------------------ after training

    def save_model(self, output_dir: Optional[str] = None) -> Path:
        """Save the trained policy (weights and tokenizer) as a transformers model folder."""
        if self._runtime is None:
            raise ConfigError("save_model() before train()", where="GRPOTrainer.save_model",
                              hint="call trainer.train() first")
        target = Path(output_dir or self.output_dir)
        model = self._runtime.model
        if hasattr(model, "merge_and_unload"):  # a LoRA policy: save the merged weights
            model = model.merge_and_unload()
        model.save_pretrained(target)
        self._runtime.tokenizer.save_pretrained(target)
        return target

    def push_to_hub(self, commit_message: str = "End of training", **kwargs: Any) -> Any:
        """Save the model and upload the folder to ``args.hub_model_id`` (needs a reachable
        hub and a token: ``huggingface-cli login``)."""
        from huggingface_hub import HfApi

        repo = self.args.hub_model_id or self.output_dir.name
        folder = self.save_model()
        api = HfApi()
        api.create_repo(repo, exist_ok=True, private=kwargs.get("private"))
        return api.upload_folder(repo_id=repo, folder_path=str(folder),
                                 commit_message=commit_message,
                                 ignore_patterns=["workspace/**", "checkpoints/**"])


_ROLLOUT_FUNC = (
    "TRL trains on the prompt_ids, completion_ids and logprobs the function returns; rltune "
    "trains only on the tokens its gateway recorded as sampled, and the gateway's OpenAI "
    "responses carry no token ids, so a rollout_func could neither return the ids that were "
    "sampled nor have ids of its own trusted. Put the function's body in an "
    "AbstractRolloutProcessor.process() that calls the OpenAI endpoint in "
    "input_data.model_resource (every call is recorded and trained on; extra fields go in "
    "rollout_extra for the reward functions) and run it with `rltune train`; or pass "
    "tools=[...] or environment_factory= for a tool loop")


def _environment(factory: Any, problems: list[tuple[str, str]]
                 ) -> tuple[Any, list[Any], Any]:
    """TRL's ``environment_factory``: the factory, one probe instance's tool methods (for
    their schemas) and, when its class defines ``get_reward``, the reward that reads it."""
    if factory is None:
        return None, [], None
    if isinstance(factory, dict):
        problems.append(("environment_factory", "a dict of environments (one per example's "
                         "`environment` column) is not supported; pass one factory"))
        return None, [], None
    if not callable(factory):
        problems.append(("environment_factory", f"is a {type(factory).__name__}; pass a "
                         "callable (a class) that returns an environment"))
        return None, [], None
    from rltune.trl.worker import EnvironmentReward, environment_methods

    try:
        probe = factory()
    except Exception as exc:
        problems.append(("environment_factory", f"calling it raised {type(exc).__name__}: "
                         f"{exc}"))
        return None, [], None
    if not callable(getattr(probe, "reset", None)):
        problems.append(("environment_factory", f"{type(probe).__name__} has no reset(); "
                         "an environment needs reset(**row) returning None or a string"))
        return None, [], None
    reward = None
    if callable(getattr(type(probe), "get_reward", None)):
        reward = EnvironmentReward(type(probe).__name__)
    return factory, list(environment_methods(probe).values()), reward


def _default_output_dir(model: Any) -> str:
    name = model if isinstance(model, str) else getattr(model, "name_or_path", "model")
    return f"{str(name).rstrip('/').split('/')[-1]}-GRPO"


def _local_model(name: str) -> Optional[str]:
    """A model folder for ``name``: the folder itself, or the hub cache's copy."""
    if Path(name).is_dir():
        return str(Path(name).resolve())
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, local_files_only=True)
    except Exception:
        return None
