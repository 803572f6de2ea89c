"""The resources a training job holds while it trains: engine, gateway, policy, reference,
teacher, function pools, rewarder and rollout runner. No step logic lives here
(``trainer/step.py`` has the data path).

``TrainingRuntime`` is an async context manager: entering picks the device, loads the model
twice (an engine copy that samples and the policy that trains, ``trainer/policy.py``), starts
the policy gateway (on 127.0.0.1; with functions on Ray at this machine's cluster address) and
the function pools; leaving stops them all, even after an error. Seams: ``build_engine`` is
the one place an engine is chosen and started; ``sync_weights`` is the one place new weights
reach it.

Full fine-tuning (``lora_rank: 0``) loads a third, frozen copy as the KL reference when the
KL term is on. With ``lora_rank > 0`` the policy is wrapped with LoRA adapters and is its own
reference (adapters disabled); the engine then gets the merged weights (``trainer/lora.py``).
On-policy distillation (``training.type: pg_opd``) also loads the frozen teacher.

With ``n_gpus_training: N`` > 1 this process is rank 0 of N data-parallel trainer ranks
(``trainer/parallel/ranks.py``): its policy is sharded, ``updater`` sends each call to the
other ranks, and the engine and checkpoints get the full weights gathered from every rank.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import torch

from rltune.config import JobConfig
from rltune.config.datasets import TrainingType
from rltune.jobdir import JobDir
from rltune.rollout.rewarder import RewardComponent, Rewarder
from rltune.rollout.runner import BuiltinRollout, RolloutRunner
from rltune.sdk.data import FunctionType
from rltune.sdk.errors import ConfigError
from rltune.trainer.device import (
    check_precision,
    frozen_dtype,
    home_device,
    weight_dtype,
)
from rltune.trainer.policy import load_policy
from rltune.trainer.protocols import Updater
from rltune.trainer.signals.teacher import Teacher
from rltune.trainer.update import PolicyUpdater

if TYPE_CHECKING:
    from rltune.engine.base import Engine


def resolve_model_path(name: str) -> Path:
    """The model directory for a job's model spec (``rltune.models.registry.resolve_model``)."""
    from rltune.models.registry import resolve_model

    return resolve_model(name)


def functions_seeing(config: JobConfig, *, as_user: bool) -> str:
    """One log line: what the job's functions see of this machine, and how to pass more."""
    from rltune.functions.sandbox import active_isolation, isolation_chosen

    remote = config.function_backend is not None and config.function_backend.type != "local"
    if as_user and not remote and not isolation_chosen():
        return ("functions run as you (a local rltune train): your environment, HOME and "
                "files, as your own script would; the job server sandboxes them "
                "(set RLTUNE_FUNCTION_ISOLATION=auto here to run them so)")
    if remote:
        return ("functions run on the Ray cluster's workers: pass a variable such as "
                "OPENAI_API_KEY in the function's runtime.env and files in its workspace")
    where = "a sandbox (bubblewrap)" if active_isolation() == "bwrap" else \
        "a minimal environment"
    return (f"functions run in {where}: they see none of this process's environment but "
            "runtime.env, and only their workspace (read-only in the sandbox); pass a "
            "variable such as OPENAI_API_KEY in the function's runtime.env, put files in the "
            "workspace, write to $HOME or $TMPDIR (private to the worker)")


def component_spec(comp: Any, func_type: FunctionType, base_dir: Path) -> Any:
    """The function pool's spec for one configured component."""
    from rltune.functions.spec import FunctionComponentSpec

    fc = comp.fcmodel
    if not fc or not fc.classpath:
        raise ConfigError(
            f"function {comp.name!r} has no fcmodel.classpath",
            where=f"functions[{comp.name}]",
            hint="set fcmodel.classpath, e.g. functions/reward.py:MyReward",
        )
    return FunctionComponentSpec(
        classpath=fc.classpath,
        func_type=func_type,
        workspace=(base_dir / (fc.zipdir or ".")).resolve(),
        name=comp.name,
        timeout=comp.timeout,
        runtime=comp.runtime or {},  # the spec takes the job config's runtime model as is
        build_venv="auto",  # a job installs requirements.txt lines this env lacks
    )


def engine_options(config: JobConfig, device: torch.device) -> dict[str, Any]:
    """The job's engine keys as ``engine.select.build_engine``'s arguments: replicas and
    their devices, vLLM's tensor parallelism (``config/rollout_layout.py``)."""
    from rltune.config.rollout_layout import rollout_layout
    from rltune.engine.placement import replica_devices

    hp = config.hyper_parameters
    layout = rollout_layout(config.engine or "builtin", hp)
    return dict(
        device=str(device),
        dtype=str(weight_dtype(hp)).removeprefix("torch."),
        threads=int(os.environ.get("RLTUNE_TORCH_THREADS", "2")),
        model_name=config.model.name or "policy",
        max_batch_size=max(8, hp.batch_size * hp.n_rollouts),
        gpu_memory_utilization=hp.inference_gpu_memory_utilization,
        seed=hp.seed,
        replicas=layout.replicas,  # > 1 or ray: an EngineGroup (engine/group.py)
        replica_devices=replica_devices(str(device), layout.replicas, layout.gpus),
        tensor_parallel_size=layout.tensor_parallel,
        replica_backend=hp.inference_replica_backend or "local",
        ray_address=fb.address if (fb := config.function_backend) and fb.type == "ray" else None,
    )


def build_engine(config: JobConfig, model_path: Path, device: torch.device) -> Engine:
    """Start the engine that samples for the job (``engine``: built-in or vLLM), on the job's
    device, in the policy's precision; ``inference_replicas`` (or ``n_gpus_rollout``) of them
    behind one group."""
    from rltune.engine.select import build_engine as start_engine

    engine: Engine = start_engine(config.engine or "builtin", model_path,
                                  **engine_options(config, device))
    return engine


def replica_places(engine: Engine) -> str:
    """Where each of an engine group's Ray replicas runs (its node and the node's address),
    for the job's log; empty for an engine without Ray replicas."""
    places = []
    for i, replica in enumerate(getattr(engine, "replicas", None) or []):
        info = getattr(replica, "info", None)
        if isinstance(info, dict) and "host" in info:
            places.append(f"replica {i} on node {str(info.get('node', ''))[:12]} "
                          f"({info['host']})")
    return ", ".join(places)


class TrainingRuntime:
    """The started resources of a job (see the module doc); a ``StepRuntime``."""

    engine: Engine
    updater: Updater
    runner: RolloutRunner
    val_runner: RolloutRunner  # validation's: the training sampling, or val_temperature's
    rewarder: Rewarder
    teacher: Teacher | None

    def __init__(
        self,
        config: JobConfig,
        *,
        job_dir: Path,
        base_dir: Path,
        job_id: str,
        total_steps: int,
        log: Callable[..., None],
        functions_as_user: bool = False,
    ):
        self.config, self.base_dir, self.job_id = config, base_dir, job_id
        self.functions_as_user = functions_as_user
        self.hp, self.knobs = config.hyper_parameters, config.knobs
        self.total_steps = total_steps
        self.log = log
        self.model_path = resolve_model_path(config.model.name or "")
        self.job_dir = Path(job_dir)
        self.files = JobDir(self.job_dir)
        self.ckpt_root = self.files.checkpoints
        from rltune.trainer.machine import check_machine

        # Refused here, before anything starts, all at once: a device, a Ray cluster
        # (nnodes_training > 1) or inference GPUs (n_gpus_rollout) this machine lacks.
        self.device, self.on_ray = check_machine(config)
        self.ranks = self.hp.trainer_ranks  # trainer ranks (data parallel)
        self._closers: list[Any] = []

    async def __aenter__(self) -> TrainingRuntime:
        try:
            await self._start()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def _start(self) -> None:
        from transformers.utils import logging as hf_logging

        from rltune.gateway.toolcalls import parser_name_for_model_dir

        # before any weights load: an unknown model family, parser or precision fails here
        parser = parser_name_for_model_dir(self.model_path, self.config.model.tool_call_parser)
        check_precision(self.hp, self.device)

        from rltune.gateway.server import Gateway

        hp = self.hp
        hf_logging.disable_progress_bar()  # per-load tqdm bars drown the job's own progress
        torch.manual_seed(hp.seed)
        self.engine = build_engine(self.config, self.model_path, self.device)
        self._closers.append(self.engine.close)
        if where := replica_places(self.engine):
            self.log(f"engine replicas on Ray: {where}")
        self.tokenizer = self.engine.tokenizer
        self.teacher = self._load_teacher() if self.config.training.type is \
            TrainingType.PG_OPD else None
        self.gateway = await Gateway.start(
            self.engine, host=self._gateway_host(), tool_parser=parser,
            chat_template_kwargs=self.config.model.chat_template_kwargs,
            max_concurrent_requests=hp.max_concurrent_requests)
        self._closers.append(self.gateway.stop)
        self.log(f"policy gateway at {self.gateway.base_url}, model {self.model_path}, "
                 f"tool-call parser {parser}")

        self.model, reference = load_policy(self.model_path, hp, self.knobs, self.device,
                                            self.log)
        if self.ranks > 1:
            await self._start_ranks(reference)
        else:
            self.updater = PolicyUpdater(
                self.model,
                hp,
                self.knobs,
                total_steps=max(1, self.total_steps),
                reference_model=reference,
                pad_token_id=self.tokenizer.pad_token_id or 0,
            )
        await self._start_functions()
        if hasattr(self.engine, "replica_stats"):  # the first closer: the replicas' last state
            self._closers.append(self._log_replicas)

    async def _start_ranks(self, reference: Optional[torch.nn.Module]) -> None:
        """Data parallel (``n_gpus_training`` > 1): this process is rank 0 of the update and
        starts the other ranks (``trainer/parallel/ranks.py``); with ``nnodes_training`` on a Ray
        cluster every rank is a Ray actor (``trainer/parallel/ray_ranks.py``)."""
        if self.on_ray:
            await self._start_ray_ranks()
            return
        from rltune.trainer.parallel.ranks import start_ranked_updater

        self.updater = await start_ranked_updater(
            self.model, self.hp, self.knobs, world_size=self.ranks, model_path=self.model_path,
            device=self.device, total_steps=max(1, self.total_steps),
            pad_token_id=self.tokenizer.pad_token_id or 0, log_dir=self.files.ranks,
            reference_model=reference)
        self._closers.append(self.updater.close)
        self.log(f"data parallel: {self.ranks} trainer ranks (FSDP2, "
                 f"{'NCCL' if self.device.type == 'cuda' else 'gloo'}); ranks 1.."
                 f"{self.ranks - 1} log to {self.files.ranks}")

    async def _start_ray_ranks(self) -> None:
        import asyncio

        from rltune.trainer.parallel.ray_ranks import start_ray_ranked_updater

        placement = self.hp.trainer_placement or "spread"
        backend = self.config.function_backend
        updater = await asyncio.to_thread(
            start_ray_ranked_updater, self.hp, self.knobs,
            address=backend.address if backend is not None else None,
            world_size=self.ranks, model_path=self.model_path, device=self.device,
            total_steps=max(1, self.total_steps),
            pad_token_id=self.tokenizer.pad_token_id or 0, placement=placement,
            log_dir=self.files.ranks)
        self.updater = updater
        self._closers.append(updater.close)
        if self.hp.checkpoint_format == "sharded":  # every rank writes into the same folder
            await asyncio.to_thread(updater.transport.check_shared, self.ckpt_root)
        where = ", ".join(f"rank {p.rank} on {p.describe()}" for p in updater.transport.places)
        self.log(f"data parallel on Ray: {self.ranks} trainer ranks ({placement} placement, "
                 f"FSDP2, {'NCCL' if self.device.type == 'cuda' else 'gloo'}): {where}; "
                 f"rendezvous at {updater.transport.rendezvous}")

    async def _log_replicas(self) -> None:
        """One line as the job ends: each engine replica's weight version, requests, failure."""
        stats = self.engine.replica_stats()  # type: ignore[attr-defined]
        self.log("engine replicas at the end: " + ", ".join(
            f"replica {r['replica']} weight version {r['weight_version']}, {r['requests']} "
            f"requests" + (f", failed: {r['failed']}" if r.get("failed") else "")
            for r in stats))

    def _load_teacher(self) -> Teacher:
        # Loaded before the rest starts: a teacher with another tokenizer fails fast.
        hp, teacher = self.hp, self.config.teacher_model or ""
        teacher_path = resolve_model_path(teacher)
        loaded = Teacher.load(
            teacher_path,
            student_tokenizer=self.tokenizer,
            student_name=self.config.model.name or str(self.model_path),
            teacher_name=teacher,
            home=home_device(hp, self.device),
            dtype=frozen_dtype(hp),
            device=self.device,
            temperature=hp.temperature,
            micro_batch_size=hp.micro_batch_size,
            pad_token_id=self.tokenizer.pad_token_id or 0,
            bf16=hp.bf16,
            chunk_mib=hp.logprob_chunk_mib,
        )
        self.log(f"teacher model {teacher_path} (frozen, on {home_device(hp, self.device)}) "
                 "for on-policy distillation")
        return loaded

    def _gateway_host(self) -> str:
        """127.0.0.1, or with functions on Ray an address every node reaches."""
        backend = self.config.function_backend
        if backend is None or backend.type != "ray":
            return "127.0.0.1"
        from rltune._ray import connect, disconnect
        from rltune.functions.backends.ray_backend import gateway_host

        connect(backend.address)  # held until the job ends: the pools share it

        async def leave() -> None:
            disconnect()

        self._closers.append(leave)
        return gateway_host(backend)

    async def _start_functions(self) -> None:
        """The rollout caller, the reward pools, the rewarder and the rollout runner."""
        from rltune.functions.backends import backend_for
        from rltune.functions.pool import FunctionPool

        hp = self.hp

        self.log(functions_seeing(self.config, as_user=self.functions_as_user))

        async def start_pool(comp: Any, ftype: FunctionType) -> Any:
            pool = await FunctionPool.start(component_spec(comp, ftype, self.base_dir),
                                            backend_for(self.config.function_backend,
                                                        as_user=self.functions_as_user))
            self._closers.append(pool.close)
            where = type(pool.backend).__name__
            urls = ", ".join(w.handle.base_url for w in pool.workers)
            self.log(f"started {ftype.value} function {comp.name} ({comp.fcmodel.classpath}) "
                     f"on {where}: {len(pool.workers)} instance(s) at {urls}")
            return pool

        rollout = self.config.rollout
        if rollout is not None:
            caller: Any = await start_pool(rollout, FunctionType.ROLLOUT)
        else:
            caller = BuiltinRollout()
            self._closers.append(caller.close)
            self.log("no rollout function configured: using the built-in single-turn rollout")
        components = []
        for comp, kind in [*((c, FunctionType.REWARD) for c in self.config.rewards),
                           *((c, FunctionType.GROUP_REWARD) for c in self.config.group_rewards)]:
            components.append(RewardComponent(
                name=comp.name or kind.value,
                pool=await start_pool(comp, kind),
                group=kind is FunctionType.GROUP_REWARD,
                weight=1.0 if comp.weight is None else comp.weight,
                metric_weights=comp.reward_metric_weight,
            ))
        self.rewarder = Rewarder(components, job_id=self.job_id, max_retries=hp.max_rollout_retries)
        sampling = {
            "temperature": hp.temperature,
            "top_p": hp.top_p,
            "max_tokens": hp.max_length - hp.max_prompt_length,
        }
        # Training and validation share the caller and gateway; validation samples at
        # val_temperature when it is set (unset: the training sampling).
        def runner(params: dict[str, Any]) -> RolloutRunner:
            return RolloutRunner(caller, self.gateway, job_id=self.job_id,
                                 model_name=self.gateway.model_name, sampling_params=params,
                                 max_retries=hp.max_rollout_retries)

        self.runner = runner(sampling)
        self.val_runner = self.runner if hp.val_temperature is None else runner(
            {**sampling, "temperature": hp.val_temperature})

    async def __aexit__(self, *exc: Any) -> None:
        while self._closers:
            close = self._closers.pop()
            try:
                await close()
            except Exception as err:  # keep closing the rest
                self.log(f"error while shutting down: {err}", level="WARNING")

    async def sync_weights(self) -> None:
        """Send the policy's current weights to the engine (after every update and restore).
        The engine holds a plain HF model: a LoRA policy sends its merged weights, a sharded
        one the full weights gathered from every rank."""
        await self.engine.update_weights(await self.updater.afull_weights())

    def checkpoint_kwargs(self) -> dict[str, Any]:
        """How a checkpoint saves the weights (``save_checkpoint``'s keywords): every rank's
        shards (``checkpoint_format: sharded``), the full weights gathered from every rank,
        or (``{}``) the policy itself."""
        if self.hp.checkpoint_format == "sharded":
            return {"sharded": True}
        return {"weights": self.updater.full_weights()} if self.ranks > 1 else {}

    def restore_policy(self, path: Path) -> None:
        """Load a checkpoint's weights into the policy (on every rank)."""
        from rltune.trainer.checkpoint import checkpoint_weights, restore_policy
        from rltune.trainer.parallel.sharded import is_sharded

        if is_sharded(path):  # the shards load with the optimizer (restore_training_state)
            return
        if self.ranks > 1:
            self.updater.load_weights(checkpoint_weights(path))
        else:
            restore_policy(self.model, path)
