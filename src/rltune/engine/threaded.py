"""The base of engines driven by one scheduler thread (the built-in engine and vLLM).

What every such engine shares lives here: a request becomes a :class:`Job` whose ``n`` choices
(*rows*) wait in a queue until the scheduler thread admits them; the thread reports tokens and
results back to the asyncio loop that submitted the job (:meth:`Job.emit`,
:meth:`Job.finish_choice`, :meth:`Job.fail`). A caller that goes away (the awaiting task is
cancelled, or the stream is closed early, e.g. by an HTTP client disconnecting) aborts its job:
its waiting rows are dropped at once and the scheduler drops its running rows at its next step,
so no more tokens are generated for it. :meth:`pause` stops admissions and returns once nothing
runs; :meth:`update_weights` loads new weights while paused, so no sequence mixes two versions.

A subclass keeps only what is its own: building the rows of a job (:meth:`_rows`), admitting
and stepping them (:meth:`_step`), its running rows (:meth:`_running_rows`,
:meth:`_drop_running`) and loading weights (:meth:`_load_state`).

Example (a subclass's scheduler loop, run by :meth:`_run`):
    >>> class Echo(ThreadedEngine):                             # doctest: +SKIP
    ...     def _rows(self, job): return [Row(job, i) for i in range(job.request.sampling.n)]
    ...     def _step(self, admit): ...  # one scheduler step over the admitted + running rows
"""

from __future__ import annotations

import abc
import asyncio
import collections
import contextlib
import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import Any, Optional

from rltune.engine.base import Engine
from rltune.engine.types import Completion, GenerationRequest, GenerationResult, TokenDelta
from rltune.sdk.errors import ConflictError, ValidationError

log = logging.getLogger(__name__)

#: The counters :meth:`Engine.token_counters` reports, where a subclass keeps them in ``stats``.
TOKEN_COUNTERS = ("prompt_tokens", "prefill_tokens")


class Job:
    """One request: its ``n`` choices report back to the asyncio loop that submitted it."""

    def __init__(self, request: GenerationRequest, loop: asyncio.AbstractEventLoop,
                 stream: bool, version: int = 0):
        self.request = request
        self.loop = loop
        self.future: asyncio.Future[GenerationResult] = loop.create_future()
        self.queue: Optional[asyncio.Queue[TokenDelta | BaseException]] = (
            asyncio.Queue() if stream else None)
        self.started = time.perf_counter()
        self.done: dict[int, Completion] = {}
        self.weight_version = version
        self.cancelled = False  # the caller went away: its rows are dropped at the next step

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


def _settle(fut: asyncio.Future[Any], value: Any, exc: Optional[BaseException]) -> None:
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(value)


class ThreadedEngine(Engine):
    """An :class:`Engine` whose model is driven by one scheduler thread.

    Subclasses set ``max_context``, ``model_name`` and ``tokenizer``, then call
    :meth:`_start` at the end of their ``__init__``. Rows are any objects with a ``job``
    attribute.
    """

    #: The scheduler thread's name and how long :meth:`close` waits for it.
    thread_name = "rltune-engine"
    close_timeout_s = 30.0
    #: When idle, arrivals are gathered into one admission until none has come for
    #: ``admit_window_s`` (0: admit at once), for at most ``admit_window_max_s`` in all.
    admit_window_s = 0.0
    admit_window_max_s = 0.0
    #: The key whose value raises the context limit (named in the too-long-prompt error).
    context_key = "max_context"

    def _start(self, vocab_size: int, extra_stats: tuple[str, ...] = ()) -> None:
        """Set up the queue and start the scheduler thread (the end of a subclass's init)."""
        self._vocab_size = int(vocab_size)
        self._version = 0
        self._cond = threading.Condition()
        self._waiting: collections.deque[Any] = collections.deque()
        self._paused = False
        self._closed = False
        self._idle = threading.Event()
        self._idle.set()
        self._last_arrival = 0.0  # monotonic time of the latest submission
        self.stats: dict[str, int] = dict.fromkeys(("steps", "tokens", "aborted", *extra_stats), 0)
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    # -- what a subclass provides -----------------------------------------------------------

    @abc.abstractmethod
    def _rows(self, job: Job) -> list[Any]:
        """The rows (one per choice) that generate ``job``; called on the submitting loop."""

    @abc.abstractmethod
    def _step(self, admit: list[Any]) -> None:
        """One scheduler step: start ``admit`` (may be empty), advance the running rows, and
        drop running rows whose ``job.cancelled`` is set."""

    @abc.abstractmethod
    def _running_rows(self) -> list[Any]:
        """The rows being generated now (scheduler thread)."""

    @abc.abstractmethod
    def _drop_running(self) -> list[Any]:
        """Forget every running row and return them (scheduler thread, on close or crash)."""

    @abc.abstractmethod
    def _load_state(self, state: dict[str, Any]) -> None:
        """Load a state dict and bump ``self._version`` (a worker thread, engine paused)."""

    def _room(self) -> Optional[int]:
        """How many more rows may be admitted now (None: all that wait)."""
        return None

    def _scheduler_context(self) -> Any:
        """A context the scheduler loop runs in (e.g. ``torch.inference_mode()``)."""
        return contextlib.nullcontext()

    # -- public API -------------------------------------------------------------------------

    @property
    def weight_version(self) -> int:
        return self._version

    def token_counters(self) -> dict[str, int]:
        return {k: self.stats[k] for k in TOKEN_COUNTERS if k in self.stats}

    def rows_in_flight(self) -> int:
        """Rows waiting or being generated (0 once every caller is served or gone)."""
        return len(self._waiting) + len(self._running_rows())

    async def generate_one(self, request: GenerationRequest) -> GenerationResult:
        """Generate every choice; cancelling the awaiting task aborts the request."""
        job = self._submit(request, stream=False)
        try:
            return await job.future
        except asyncio.CancelledError:
            self._abort(job)
            raise

    async def stream(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        """Tokens as they come; closing or cancelling the iteration aborts the request."""
        job = self._submit(request, stream=True)
        queue = job.queue
        assert queue is not None  # a streaming job has one
        remaining = request.sampling.n
        try:
            while remaining:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                if item.finished is not None:
                    remaining -= 1
                yield item
        finally:
            if remaining:
                self._abort(job)

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
        """Load new weights (a state dict, or a module's ``state_dict()``) between requests.

        If the engine is not paused it is paused for the copy, so no sequence mixes two
        weight versions.
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

    def stop(self) -> None:
        """Close without waiting: the scheduler ends after its current step (sync callers)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    async def close(self) -> None:
        self.stop()
        await asyncio.to_thread(self._thread.join, self.close_timeout_s)

    # -- submission -------------------------------------------------------------------------

    def _submit(self, request: GenerationRequest, stream: bool) -> Job:
        if self._closed:
            raise ConflictError("the engine is closed", hint="start a new engine")
        n_prompt = len(request.prompt_ids)
        if n_prompt >= self.max_context:
            raise ValidationError(
                f"prompt has {n_prompt} tokens; the model's context is {self.max_context}",
                where="prompt_ids", hint=f"shorten the conversation or raise {self.context_key}")
        if request.sampling.json_schema is not None and not self.constrains_json:
            raise ValidationError(f"{type(self).__name__} cannot constrain decoding to JSON",
                                  where="json_schema", hint="leave it unset, or use vLLM")
        bad = [t for t in request.prompt_ids if not 0 <= t < self._vocab_size]
        if bad:
            raise ValidationError(f"token id {bad[0]} is outside the vocabulary "
                                  f"(size {self._vocab_size})", where="prompt_ids",
                                  hint="tokenize with this model's tokenizer")
        job = Job(request, asyncio.get_running_loop(), stream, self._version)
        rows = self._rows(job)
        with self._cond:
            self._last_arrival = time.monotonic()
            self._waiting.extend(rows)
            self._cond.notify_all()
        return job

    def _abort(self, job: Job) -> None:
        """Forget a request whose caller is gone: waiting rows now, running rows next step."""
        job.cancelled = True
        with self._cond:
            self._waiting = collections.deque(r for r in self._waiting if r.job is not job)
            self._cond.notify_all()
        self.stats["aborted"] += 1

    # -- scheduler thread -------------------------------------------------------------------

    def _take_work(self) -> Optional[list[Any]]:
        """Wait until there is work; the rows to admit now (maybe none), or None once closed."""
        with self._cond:
            while not self._closed and not self._running_rows() and (
                    self._paused or not self._waiting):
                self._idle.set()
                self._cond.wait()
            if self._closed:
                return None
            room = self._room()
            if not self._running_rows() and self.admit_window_s > 0:
                self._gather(room)
            admit: list[Any] = []
            while not self._paused and self._waiting and (room is None or len(admit) < room):
                row = self._waiting.popleft()
                if not row.job.cancelled:
                    admit.append(row)
            self._idle.clear()
        return admit

    def _gather(self, room: Optional[int]) -> None:
        """Waking from idle, wait (holding ``_cond``) while a burst is still arriving.

        The first request of a burst (n rollouts posting at once) usually has company close
        behind it: the event loop renders and submits them one after another. Admitting all
        of them together costs one prefill, where admitting each as it comes costs one
        prefill (and a KV merge) per arrival and slows the arrivals down, since the engine
        thread then competes with the event loop for the GIL. So the admission waits until no
        request has arrived for ``admit_window_s``, the room is full, or ``admit_window_max_s``
        has passed since the engine woke.
        """
        deadline = time.monotonic() + max(self.admit_window_max_s, self.admit_window_s)
        while not self._closed and not self._paused and (
                room is None or len(self._waiting) < room):
            end = min(self._last_arrival + self.admit_window_s, deadline)
            left = end - time.monotonic()
            if left <= 0:
                return
            self._cond.wait(left)

    def _run(self) -> None:
        try:
            with self._scheduler_context():
                while (admit := self._take_work()) is not None:
                    self._step(admit)
        except BaseException as exc:  # a crash must not leave callers waiting forever
            log.exception("%s: the engine's scheduler crashed", self.model_name)
            self._fail_all(exc)
            return
        self._fail_all(ConflictError("the engine was closed while the request was running"))

    def _fail_all(self, exc: BaseException) -> None:
        with self._cond:
            rows = list(self._waiting)
            self._waiting.clear()
            self._closed = True
            self._idle.set()
        rows += self._drop_running()
        for job in {id(r.job): r.job for r in rows}.values():
            job.fail(exc)


def check_model_dir(path: str | Path, hint: str) -> Path:
    """``path`` as a :class:`Path`, or a :class:`ValidationError` if no model is saved there."""
    path = Path(path)
    if not (path / "config.json").is_file():
        raise ValidationError(f"no model found at {path} (config.json is missing)",
                              where=str(path), hint=hint)
    return path


def eos_ids(generation_eos: Any, tokenizer: Any) -> set[int]:
    """End-of-sequence ids: the generation config's ``eos_token_id`` (one or a list) and the
    tokenizer's."""
    ids: set[int] = set()
    if isinstance(generation_eos, int):
        ids.add(generation_eos)
    elif generation_eos:
        ids.update(int(e) for e in generation_eos)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return ids


def find_stop(stops: list[str], ids: list[int], decode: Callable[[list[int]], str]
              ) -> Optional[str]:
    """The first stop string in the text of the last tokens of ``ids``, if any.

    Each token is at least one byte, so the last ``len(bytes) + 1`` tokens hold any new match.
    """
    longest = max(len(s.encode()) for s in stops)
    tail = decode(ids[-(longest + 1):])
    return next((s for s in stops if s and s in tail), None)
