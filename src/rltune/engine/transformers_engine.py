"""The built-in engine: a ``transformers`` causal LM behind a continuous-batching scheduler.

One scheduler thread owns the model. Each loop it (1) admits waiting requests into the running
batch: their prompts are prefilled together (each distinct prompt once, the prefix they share
once, and each row only after the longest prefix of it whose KV the engine kept, from an
earlier prompt or a finished sequence under the same weights: :mod:`rltune.engine.prefill`,
:mod:`rltune.engine.prefixcache`; position ids count real tokens only) and their KV cache is
merged into the running one, so a request that arrives while a batch runs joins it at the next
token instead of waiting for the batch to end; (2) runs one decode step for every running row;
(3) retires finished rows, keeping their KV in the prefix cache for the next turn. torch
releases the GIL inside its kernels, so the asyncio HTTP loop stays responsive while the thread
computes. Jobs, streaming, abort when the caller leaves, pause and weight updates are the
threaded engine's (:mod:`rltune.engine.threaded`); a cancelled job's rows leave the batch at the
next step.

Example:
    >>> from rltune.engine import TransformersEngine, GenerationRequest, SamplingParams
    >>> async def demo(path):                                   # doctest: +SKIP
    ...     engine = TransformersEngine.from_pretrained(path, threads=2)
    ...     ids = engine.tokenizer.encode("Hello")
    ...     [res] = await engine.generate(GenerationRequest(
    ...         prompt_ids=ids, sampling=SamplingParams(max_tokens=8, seed=0)))
    ...     print(res.completions[0].completion_ids, res.completions[0].logprobs)
    ...     await engine.close()
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Optional

from rltune.engine.cache_support import check_builtin_cache
from rltune.engine.hf_compat import cache_kwargs
from rltune.engine.kvbatch import KVBatch, stack_left_padded
from rltune.engine.prefill import MIN_SHARED_TOKENS, PrefillPlan, plan_prefill
from rltune.engine.prefixcache import Layers, PrefixCache
from rltune.engine.sampling import RowParams, sample_batch
from rltune.engine.threaded import (
    TOKEN_COUNTERS,
    Job,
    ThreadedEngine,
    check_model_dir,
    eos_ids,
    find_stop,
)
from rltune.engine.types import Completion, FinishReason, TokenDelta, TopLogprob
from rltune.sdk.errors import DependencyError

log = logging.getLogger(__name__)

# Gathering a burst into one admission (``admit_window_s``, ``admit_window_max_s``): on the
# trl_compare rollout (32 chat calls posted at once, 2 busy cores) a 5 ms quiet gap took each
# step's burst in one prefill (1.0 per step, from 4.9 with a fixed 5 ms window); the 100 ms cap
# bounds the wait of an idle engine under a steady trickle (benchmarks/RESULTS.md, 2026-12-03).
ADMIT_WINDOW_S = 0.005
ADMIT_WINDOW_MAX_S = 0.1


class _Seq:
    """One choice being generated: a row of the running batch."""

    def __init__(self, job: Job, index: int, eos_ids: set[int], decode: Any):
        sp = job.request.sampling
        self.job, self.index, self.sp = job, index, sp
        self.prompt_ids = job.request.prompt_ids
        self.out_ids: list[int] = []
        self.out_lps: list[float] = []
        self.top: Optional[list[list[TopLogprob]]] = [] if sp.top_logprobs else None
        self.stop_ids = set(sp.stop_token_ids) | (set() if sp.ignore_eos else eos_ids)
        self.eos_ids = eos_ids
        self.decode = decode
        self.version = 0  # the weight version at prefill (no sequence spans two versions)
        generator = None
        if sp.seed is not None:
            import torch

            generator = torch.Generator().manual_seed(sp.seed + index)
        self.row = RowParams(sp.temperature, sp.top_p, sp.top_k, [], generator, sp.top_logprobs)
        self._update_banned()

    def _update_banned(self) -> None:
        # Stop tokens are banned from sampling (not from the recorded log-probs) until
        # min_tokens is reached. ignore_eos only means "do not stop on it", as in vLLM.
        early = len(self.out_ids) < self.sp.min_tokens
        self.row.banned = sorted(self.stop_ids | self.eos_ids) if early else []

    def append(self, token: int, logprob: float, top: Optional[list[TopLogprob]],
               max_context: int) -> Optional[Completion]:
        """Record a sampled token; return the finished completion if this token ends it."""
        self.out_ids.append(token)
        self.out_lps.append(logprob)
        if self.top is not None and top is not None:
            self.top.append(top)
        if len(self.out_ids) == self.sp.min_tokens:
            self._update_banned()
        reason: Optional[FinishReason] = None
        stop_reason: Optional[str | int] = None
        if token in self.stop_ids:
            reason = "stop"
            stop_reason = None if token in self.eos_ids else token
        elif self.sp.stop:
            hit = find_stop(self.sp.stop, self.out_ids, self.decode)
            if hit is not None:
                reason, stop_reason = "stop", hit
        if reason is None and (len(self.out_ids) >= self.sp.max_tokens
                               or len(self.prompt_ids) + len(self.out_ids) >= max_context):
            reason = "length"
        if reason is None:
            return None
        return self.completion(reason, stop_reason)

    def completion(self, reason: FinishReason,
                   stop_reason: Optional[str | int] = None) -> Completion:
        return Completion(index=self.index, completion_ids=list(self.out_ids),
                          logprobs=list(self.out_lps), finish_reason=reason,
                          stop_reason=stop_reason, top_logprobs=self.top,
                          weight_version=self.version)


class TransformersEngine(ThreadedEngine):
    """Continuous-batching engine over a ``transformers`` causal LM (CPU or one GPU).

    ``threads`` caps torch's intra-op threads (process-wide: torch has one setting).
    ``max_batch_size`` caps running rows; more requests wait in a FIFO queue.
    ``admit_window_s``: an idle engine gathers arriving requests into one prefill until none
    has arrived for this long (0 = admit at once), for at most ``admit_window_max_s``
    (:meth:`~rltune.engine.threaded.ThreadedEngine._gather`). ``min_shared_prefix``: the
    shortest prompt prefix common to an admission that is run once instead of once per row
    (:mod:`~rltune.engine.prefill`). ``prefix_cache_bytes``: the bound of the KV kept by token
    prefix, so a prompt that extends an earlier prompt or finished sequence prefills only its
    new tokens (:mod:`~rltune.engine.prefixcache`; None: ``RLTUNE_PREFIX_CACHE_MB``, 0: off).

    Before it starts, the engine checks that the model really uses the KV cache it is given
    (:meth:`check_kv_cache`) and raises :class:`DependencyError` if it does not;
    ``kv_check_tolerance`` overrides the dtype's default tolerance (``CHECK_TOLERANCE``).
    """

    def __init__(self, model: Any, tokenizer: Any, *, model_name: str = "model",
                 threads: int = 2, max_batch_size: int = 64,
                 max_context: Optional[int] = None, admit_window_s: float = ADMIT_WINDOW_S,
                 admit_window_max_s: float = ADMIT_WINDOW_MAX_S,
                 min_shared_prefix: int = MIN_SHARED_TOKENS,
                 prefix_cache_bytes: Optional[int] = None,
                 kv_check_tolerance: Optional[float] = None):
        import torch

        if threads > 0:
            torch.set_num_threads(threads)
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_name = model_name
        self.device = next(model.parameters()).device
        self.max_batch_size = max_batch_size
        self.admit_window_s = admit_window_s
        self.admit_window_max_s = admit_window_max_s
        cfg_ctx = getattr(model.config, "max_position_embeddings", None) or 2048
        self.max_context = int(max_context or cfg_ctx)
        gen = getattr(model, "generation_config", None)
        self.eos_ids = eos_ids(getattr(gen, "eos_token_id", None), tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else min(self.eos_ids, default=0))
        self._active: list[_Seq] = []
        self._batch: Any = None  # KVBatch of the running rows
        self._step_lock = threading.Lock()
        #: computed KV by token prefix (``prefixcache.py``); dropped on a weight update
        self.prefix_cache = PrefixCache(prefix_cache_bytes)
        self.min_shared_prefix = min_shared_prefix
        self.check_kv_cache(kv_check_tolerance)
        self._start(model.config.vocab_size,
                    extra_stats=("prefills", "max_rows", *TOKEN_COUNTERS))

    @classmethod
    def from_pretrained(cls, path: str | Path, *, device: str = "cpu", dtype: str = "float32",
                        **kwargs: Any) -> TransformersEngine:
        """Load a saved model directory (model + tokenizer) and start the engine."""
        import torch
        from transformers import AutoModelForCausalLM

        path = check_model_dir(path, "pass a directory saved with save_pretrained, or a model "
                               "name under $RLTUNE_HOME/models")
        check_builtin_cache(path)  # sliding-window or hybrid caches: engine: vllm
        loader: Any = AutoModelForCausalLM  # its decorated from_pretrained confuses type checkers
        model = loader.from_pretrained(path, dtype=getattr(torch, dtype))
        model.to(device)
        kwargs.setdefault("model_name", path.name)
        return cls(model, load_tokenizer(path), **kwargs)

    def prefix_cache_stats(self) -> dict[str, int]:
        return self.prefix_cache.snapshot()

    # -- the threaded engine's hooks --------------------------------------------------------

    def _rows(self, job: Job) -> list[_Seq]:
        return [_Seq(job, i, self.eos_ids, self._decode) for i in range(job.request.sampling.n)]

    def _decode(self, ids: list[int]) -> str:
        return str(self.tokenizer.decode(ids, skip_special_tokens=False))

    def _load_state(self, state: dict[str, Any]) -> None:
        import torch

        with self._step_lock, torch.no_grad():
            self.model.load_state_dict(state, strict=True)
            self._version += 1
            self.prefix_cache.clear(self._version)  # KV of the old weights is wrong now

    def _room(self) -> int:
        return self.max_batch_size - len(self._active)

    def _scheduler_context(self) -> Any:
        import torch

        return torch.inference_mode()

    def _running_rows(self) -> list[_Seq]:
        return self._active

    def _drop_running(self) -> list[_Seq]:
        rows, self._active, self._batch = self._active, [], None
        return rows

    def _step(self, admit: list[_Seq]) -> None:
        with self._step_lock:
            if admit:
                self._prefill(admit)
            if self._active:
                self._decode_step()

    def _forward(self, ids: Any, mask: Any, cache: Any) -> Any:
        positions = (mask.cumsum(dim=1) - 1).clamp(min=0)[:, -ids.shape[1]:]
        out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions,
                         use_cache=True, logits_to_keep=1, **cache_kwargs(self.model, cache))
        return out.logits[:, -1, :]

    def check_kv_cache(self, tolerance: Optional[float] = None) -> float:
        """Check that one cached decode step gives the logits of a full forward; return the gap.

        Prefills ``CHECK_TOKENS - 1`` tokens into a fresh cache and decodes the last one through
        the engine's own ``_forward``, then runs the whole prompt once without a cache, and
        compares the last position's log-softmax. A transformers version that takes the cache
        under another keyword runs the decode step without context (no error, wrong log-probs);
        this refuses to start instead. Costs two forward passes over a few tokens.
        """
        import torch
        import transformers
        from transformers import DynamicCache

        vocab = int(self.model.config.vocab_size)
        n = max(2, min(CHECK_TOKENS, self.max_context))
        ids = torch.tensor([[(7919 * (i + 1) + 13) % vocab for i in range(n)]],
                           device=self.device)
        mask = torch.ones_like(ids)
        with self._step_lock, torch.inference_mode():  # callable on a running engine too
            cache = DynamicCache(config=self.model.config)
            self._forward(ids[:, :-1], mask[:, :-1], cache)
            filled = int(cache.get_seq_length())
            cached = self._forward(ids[:, -1:], mask, cache)
            full = self.model(input_ids=ids, attention_mask=mask,
                              position_ids=torch.arange(n, device=self.device)[None],
                              use_cache=False).logits[:, -1, :]
        gap = float((torch.log_softmax(cached.float(), dim=-1)
                     - torch.log_softmax(full.float(), dim=-1)).abs().max())
        dtype = next(self.model.parameters()).dtype
        tol = tolerance if tolerance is not None else CHECK_TOLERANCE.get(
            str(dtype).removeprefix("torch."), CHECK_TOLERANCE["float32"])
        if filled != n - 1 or not gap <= tol:
            if filled != n - 1:
                why = f"the model kept {filled} of {n - 1} prefilled tokens in its KV cache"
                other = ("a custom model's forward must take the cache as 'cache' or "
                         "'past_key_values' and use it")
            else:
                why = "the model fills the KV cache but a step on it gives other logits"
                other = ("if the gap is only rounding on this hardware, pass a larger "
                         "kv_check_tolerance")
            raise DependencyError(
                f"the KV-cache check failed: one cached decode step and a full forward pass "
                f"disagree by {gap:.3g} (max abs diff of the log-softmax over the vocabulary; "
                f"tolerance {tol:g} for {dtype}); {why}. The engine would report wrong "
                f"log-probs, so it does not start. Installed: transformers "
                f"{transformers.__version__}, model {type(self.model).__name__}",
                where=f"engine {self.model_name}",
                hint=f"install a supported transformers version "
                f"(pip install 'transformers{_declared('transformers') or '>=5,<6'}'); {other}")
        log.debug("KV-cache check passed: gap %.3g (tolerance %g)", gap, tol)
        return gap

    def _prefill(self, seqs: list[_Seq]) -> None:
        """Admit ``seqs``: each distinct prompt once, their common prefix once, and each row
        from the end of its longest cached prefix (``prefill.py``, ``prefixcache.py``)."""
        import torch
        from transformers import DynamicCache

        plan = plan_prefill([s.prompt_ids for s in seqs], self.min_shared_prefix)
        reused, prefix = self._shared_prefix(plan)
        starts: list[int] = []
        runs: list[Layers] = []
        for u in plan.unique:  # each row starts after its longest cached prefix
            n, layers = self.prefix_cache.lookup(u, self._version, limit=len(u) - 1)
            if n < plan.shared:  # the cache is off (or let it go): the prefix just computed
                n, layers = plan.shared, prefix
            starts.append(n)
            runs.append(layers)
        cache = DynamicCache(config=self.model.config)
        head = None
        if any(starts):  # [pad | cached | pad | suffix]
            layers, head = stack_left_padded(runs, starts, self.device)
            for i, (k, v) in enumerate(layers):
                cache.update(k, v, i)
        suffixes = [u[n:] for u, n in zip(plan.unique, starts, strict=True)]
        longest = max(len(x) for x in suffixes)
        ids = torch.full((len(suffixes), longest), self.pad_id, dtype=torch.long)
        tail = torch.zeros((len(suffixes), longest), dtype=torch.long)
        for row, x in enumerate(suffixes):
            ids[row, longest - len(x):] = torch.tensor(x)
            tail[row, longest - len(x):] = 1
        ids, tail = ids.to(self.device), tail.to(self.device)
        mask = tail if head is None else torch.cat([head, tail], dim=1)
        logits = self._forward(ids, mask, cache)
        new = KVBatch(cache, mask)
        if self.prefix_cache.max_bytes:  # each prompt's KV, for the admissions after this one
            for row, u in enumerate(plan.unique):
                self.prefix_cache.insert(u, new.row_layers(row), self._version)
        if plan.duplicated:  # copy each distinct prompt's row to the rows that share it
            logits = logits[torch.tensor(plan.row_of, device=logits.device)]
            new.keep(plan.row_of)
        self.stats["prefills"] += 1
        self.stats["prompt_tokens"] += sum(len(s.prompt_ids) for s in seqs)
        self.stats["prefill_tokens"] += plan.computed_tokens(starts, reused)
        for s in seqs:
            s.version = s.job.weight_version = self._version
        keep = self._sample_and_record(seqs, logits)
        if not keep:
            return
        if len(keep) < len(seqs):
            new.keep(keep)
        joined = [seqs[i] for i in keep]
        if self._batch is None or not self._active:
            self._batch, self._active = new, joined
        else:
            self._batch.merge(new)
            self._active.extend(joined)
        self.stats["max_rows"] = max(self.stats["max_rows"], len(self._active))

    def _shared_prefix(self, plan: PrefillPlan) -> tuple[int, Layers]:
        """The KV of the plan's common prefix ([1, H, shared, D] per layer), run batch 1 after
        the part the prefix cache holds, and kept there; and how many tokens were cached."""
        import torch
        from transformers import DynamicCache

        if not plan.shared:
            return 0, []
        prefix = plan.unique[0][:plan.shared]
        reused, layers = self.prefix_cache.lookup(prefix, self._version, count=False)
        if reused == plan.shared:
            return reused, layers
        cache: Any = DynamicCache(config=self.model.config)
        for i, (k, v) in enumerate(layers):
            cache.update(k, v, i)
        mask = torch.ones((1, plan.shared), dtype=torch.long, device=self.device)
        self._forward(torch.tensor([prefix[reused:]], device=self.device), mask, cache)
        layers = [(layer.keys, layer.values) for layer in cache.layers]
        self.prefix_cache.insert(prefix, layers, self._version)
        return reused, layers

    def _keep_finished(self, s: _Seq, batch: KVBatch, row: int) -> None:
        """Keep the KV of a finished running row (prompt + completion but its last token, which
        was sampled, never fed) for a later turn that extends it."""
        if not self.prefix_cache.max_bytes:
            return
        ids = s.prompt_ids + s.out_ids[:-1]
        layers = batch.row_layers(row)
        if layers and int(layers[0][0].shape[2]) == len(ids):
            self.prefix_cache.insert(ids, layers, s.version)

    def _decode_step(self) -> None:
        import torch

        batch = self._batch
        ids = torch.tensor([[s.out_ids[-1]] for s in self._active], device=self.device)
        batch.mask = torch.cat([batch.mask, batch.mask.new_ones(batch.size, 1)], dim=1)
        logits = self._forward(ids, batch.mask, batch.cache)
        self.stats["steps"] += 1
        keep = self._sample_and_record(self._active, logits, batch)
        keep = [i for i in keep if not self._active[i].job.cancelled]
        if len(keep) < len(self._active):
            self._active = [self._active[i] for i in keep]
            if self._active:
                batch.keep(keep)
            else:
                self._batch = None

    def _sample_and_record(self, seqs: list[_Seq], logits: Any,
                           batch: Optional[KVBatch] = None) -> list[int]:
        """Sample one token per row, deliver it, and return the rows that keep going; a row
        that ends keeps its KV (from ``batch``, the running rows) in the prefix cache first,
        so a caller's next turn finds it."""
        tokens, lps, top = sample_batch(logits, [s.row for s in seqs])
        tokens, lps = tokens.tolist(), lps.tolist()
        top_rows = None
        if top is not None:
            top_rows = list(zip(top[0].tolist(), top[1].tolist(), strict=True))
        keep = []
        self.stats["tokens"] += len(seqs)
        for row, s in enumerate(seqs):
            top_here = None
            if top_rows is not None and s.sp.top_logprobs:
                vals, idxs = top_rows[row]
                k = s.sp.top_logprobs
                top_here = [TopLogprob(token_id=i, logprob=v)
                            for v, i in zip(vals[:k], idxs[:k], strict=True)]
            finished = s.append(tokens[row], lps[row], top_here, self.max_context)
            if s.job.queue is not None:  # only streaming callers want per-token deltas
                s.job.emit(TokenDelta(index=s.index, token_ids=[tokens[row]],
                                      logprobs=[lps[row]], finished=finished))
            if finished is not None:
                if batch is not None:
                    self._keep_finished(s, batch, row)
                s.job.finish_choice(finished)
            else:
                keep.append(row)
        return keep


# The engine's start-up KV-cache check: prompt length and the largest log-softmax gap allowed
# between a cached decode step and a full forward. A model run without its cache misses by
# whole nats (measured 2.7-6.6 with transformers 5.17), and the check also fails when the
# prefill leaves the cache empty, whatever the gap. fp32 on CPU measures ~5e-7.
CHECK_TOKENS = 6
CHECK_TOLERANCE = {"float32": 1e-4, "float64": 1e-6, "float16": 1e-1, "bfloat16": 5e-1}


def _declared(package: str) -> Optional[str]:
    """The version range rltune declares for ``package`` (e.g. ``">=5,<6"``), if installed."""
    try:
        import re
        from importlib.metadata import requires

        for req in requires("rltune") or []:
            m = re.match(rf"{re.escape(package)}\s*([^;\s]+)", req)
            if m and m.group(1)[0] in "<>=!~":  # ">=" first: "<6,>=5" reads ">=5,<6"
                return ",".join(sorted(m.group(1).split(","), key=lambda p: p[0] != ">"))
    except Exception:
        pass
    return None


def load_tokenizer(path: str | Path) -> Any:
    """Load a model directory's tokenizer without letting transformers swap its pre-tokenizer.

    ``AutoTokenizer`` picks a model-family class (e.g. ``Qwen2Tokenizer``) that replaces the saved
    pre-tokenizer; ``PreTrainedTokenizerFast`` keeps ``tokenizer.json`` as saved.
    """
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(path))
