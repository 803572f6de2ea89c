"""Several engine replicas behind the one ``Engine`` interface: the gateway and the trainer see
one engine, whatever sits behind it (built-in engines in this process, Ray actors on other
nodes, vLLM engines).

* **Generation**: each request goes, whole, to one replica, so a request's ``n`` choices are
  sampled and captured together. A request with a ``session`` (the gateway names one per
  rollout, or per prompt group) goes where that session's earlier calls went, so its prefix
  KV is there (:mod:`rltune.engine.affinity`); a new session, or one whose replica failed,
  goes to the least loaded live replica (fewest requests in flight plus sessions pinned; ties
  rotate) and stays there. A request without one goes to the least loaded replica.
* **Weights**: ``update_weights`` sends the new weights to every live replica at once and
  returns only when all have loaded them; ``weight_version`` moves then, never before. The
  state dict is packed once per replica kind (a Ray replica puts it in the object store once,
  every actor fetches that one copy).
* **Pause/resume, sleep/wake, close** fan out to every replica.
* **Failures**: a replica that fails a request (crashed scheduler, closed engine, dead actor)
  raises :class:`EngineReplicaError` naming its index; it is then taken out of rotation and
  of weight syncs (the others go on). One that fails a fan-out (a weight load, pause, sleep)
  or misses an update is taken out the same way, logged with its index, and listed in
  ``failed`` (the gateway's ``/health``). A request-level error (a prompt that is too long)
  passes through unchanged. With no live replica left, every call raises.

Example:
    >>> async def demo(a, b, state):                            # doctest: +SKIP
    ...     group = EngineGroup([a, b])
    ...     [res] = await group.generate(GenerationRequest(prompt_ids=[1, 2]))
    ...     await group.update_weights(state)   # both replicas, then version 1
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, Sequence
from typing import Any, NoReturn, Optional

from rltune.engine.affinity import DEFAULT_MAX_SESSIONS, SessionAffinity
from rltune.engine.base import Engine
from rltune.engine.types import GenerationRequest, GenerationResult, TokenDelta
from rltune.sdk.errors import ConflictError, RltuneError, ValidationError

log = logging.getLogger(__name__)


class EngineReplicaError(RltuneError):
    """One replica of an engine group failed; ``index`` says which."""

    http_status = 503
    code = "engine_replica_failed"

    def __init__(self, index: int, cause: BaseException | str, *, action: str = "a request"):
        self.index = index
        self.cause = cause
        if isinstance(cause, str):
            detail = cause
        else:
            text = cause.message if isinstance(cause, RltuneError) else str(cause)
            detail = f"{type(cause).__name__}: {text}"
        super().__init__(f"failed during {action}: {detail}",
                         where=f"engine replica {index}",
                         hint="the replica is out of rotation; the others keep serving. "
                              "Restart the job (or the server) to bring it back")


class EngineGroup(Engine):
    """``Engine`` over ``replicas`` (built on the same model: same tokenizer and context)."""

    def __init__(self, replicas: Sequence[Engine], *, affinity: bool = True,
                 max_sessions: int = DEFAULT_MAX_SESSIONS):
        if not replicas:
            raise ValueError("an engine group needs at least one replica")
        self.replicas = list(replicas)
        first = self.replicas[0]
        self.tokenizer = first.tokenizer
        self.model_name = first.model_name
        self.max_context = min(r.max_context for r in self.replicas)
        self.constrains_json = all(r.constrains_json for r in self.replicas)
        #: the model's HF config (the gateway picks its tool-call parser from it)
        self.model_config = getattr(first, "model_config", None) or getattr(
            getattr(first, "model", None), "config", None)
        self.outstanding = [0] * len(self.replicas)  # requests in flight, per replica
        self.assigned = [0] * len(self.replicas)  # requests routed so far, per replica
        self.failed: dict[int, str] = {}  # replica index -> why it is out of rotation
        #: sessions pinned to replicas; None routes every request by load alone
        self.affinity = SessionAffinity(max_sessions) if affinity else None
        self.affine = [0] * len(self.replicas)  # requests that followed their session's pin
        self.rerouted = [0] * len(self.replicas)  # sessions moved here off a failed replica
        self._version = first.weight_version
        self._turn = 0
        self._sync_lock = asyncio.Lock()

    # -- routing ----------------------------------------------------------------------------

    def _live(self) -> list[int]:
        live = [i for i in range(len(self.replicas)) if i not in self.failed]
        if not live:
            raise ConflictError(
                "every engine replica has failed: " + "; ".join(
                    f"replica {i} {why}" for i, why in sorted(self.failed.items())),
                where="engine", hint="restart the job (or the server)")
        return live

    def _pick(self, session: Optional[str] = None) -> int:
        live = self._live()
        pins = self.affinity if session is not None else None
        index = pins.lookup(session) if pins is not None and session is not None else None
        if index is not None and index not in self.failed:
            self.affine[index] += 1
        else:
            n = len(self.replicas)
            # least loaded (in flight + sessions held); among equals, the next one after the
            # last pick (round robin)
            index_new = min(live, key=lambda i: (
                self.outstanding[i] + (pins.sessions_on(i) if pins is not None else 0),
                (i - self._turn) % n))
            if index is not None:  # its replica failed: the session moves for good
                self.rerouted[index_new] += 1
                log.info("engine session %s moved from failed replica %d to replica %d",
                         session, index, index_new)
            index = index_new
            self._turn = (index + 1) % n
            if pins is not None and session is not None:
                pins.pin(session, index)
        self.outstanding[index] += 1
        self.assigned[index] += 1
        return index

    def _mark_failed(self, index: int, exc: BaseException | str,
                     action: str) -> EngineReplicaError:
        """Take replica ``index`` out of rotation (and of weight syncs); log why, once."""
        err = EngineReplicaError(index, exc, action=action)
        if index not in self.failed:
            self.failed[index] = err.message
            log.error("engine replica %d %s", index, err.message)
        return err

    def _failure(self, index: int, exc: BaseException, action: str) -> BaseException:
        """The error to raise for ``exc`` from replica ``index``; a replica-level one takes the
        replica out of rotation."""
        if isinstance(exc, (ValidationError, asyncio.CancelledError)):
            return exc  # the request's own fault (or its caller left): the replica is fine
        return self._mark_failed(index, exc, action)

    # -- Engine -----------------------------------------------------------------------------

    @property
    def weight_version(self) -> int:
        return self._version

    async def generate_one(self, request: GenerationRequest) -> GenerationResult:
        index = self._pick(request.session)
        try:
            return await self.replicas[index].generate_one(request)
        except BaseException as exc:
            self._raise_failure(index, exc)
        finally:
            self.outstanding[index] -= 1

    async def stream(self, request: GenerationRequest) -> AsyncGenerator[TokenDelta, None]:
        index = self._pick(request.session)
        try:
            async with contextlib.aclosing(self.replicas[index].stream(request)) as deltas:
                async for delta in deltas:
                    yield delta
        except GeneratorExit:
            raise
        except BaseException as exc:
            self._raise_failure(index, exc)
        finally:
            self.outstanding[index] -= 1

    def _raise_failure(self, index: int, exc: BaseException) -> NoReturn:
        """Re-raise a generation failure: as is, or as the replica error ``_failure`` names."""
        err = self._failure(index, exc, "generation")
        if err is exc:
            raise exc
        raise err from exc

    async def _fan_out(self, action: str, call: Any) -> list[tuple[int, Any]]:
        """Run ``call(replica)`` on every live replica at once and return ``(index, result)``
        of those that succeeded. A replica that fails is taken out of rotation (logged, in
        ``failed`` and ``/health``) and the others go on; when none succeeds this raises."""
        indices = self._live()
        outs = await asyncio.gather(*(call(self.replicas[i]) for i in indices),
                                    return_exceptions=True)
        ok, errors = [], []
        for i, out in zip(indices, outs, strict=True):
            if isinstance(out, asyncio.CancelledError):
                raise out
            if isinstance(out, BaseException):
                errors.append(self._mark_failed(i, out, action))
            else:
                ok.append((i, out))
        if not ok:
            raise errors[0] if len(errors) == 1 else EngineReplicaError(
                errors[0].index, "; ".join(f"replica {e.index} {e.message}" for e in errors),
                action=f"{action} (every replica failed)")
        return ok

    async def pause(self) -> None:
        await self._fan_out("pause", lambda r: r.pause())

    async def resume(self) -> None:
        await self._fan_out("resume", lambda r: r.resume())

    async def update_weights(self, weights: Any) -> int:
        """Load the weights into every live replica; the version moves once all have. A
        replica that fails the load, or comes back with another version than the group's
        next one (it missed an update), is taken out of rotation."""
        async with self._sync_lock:
            state = weights.state_dict() if hasattr(weights, "state_dict") else weights
            packed: dict[type, Any] = {}  # one packing (e.g. one ray.put) per replica kind
            for i, r in enumerate(self.replicas):
                pack = getattr(type(r), "pack_weights", None)
                if i not in self.failed and pack is not None and type(r) not in packed:
                    packed[type(r)] = pack(state)
            done = await self._fan_out(
                "a weight update", lambda r: r.update_weights(packed.get(type(r), state)))
            want = self._version + 1
            for i, version in done:
                if version != want:
                    self._mark_failed(i, f"its weight version is {version} after the update, "
                                         f"the group's is {want}: it missed an update",
                                      "a weight update")
            self._live()  # raises if no replica is left
            self._version = want
            return self._version

    async def sleep(self) -> bool:
        return any(freed for _, freed in await self._fan_out("sleep", lambda r: r.sleep()))

    async def wake_up(self) -> None:
        await self._fan_out("wake up", lambda r: r.wake_up())

    async def close(self) -> None:
        """Close every replica, failed ones too (their errors are only logged); raise for a
        live one that could not close, after trying all."""
        outs = await asyncio.gather(*(r.close() for r in self.replicas), return_exceptions=True)
        first = None
        for i, out in enumerate(outs):
            if isinstance(out, BaseException):
                log.warning("engine replica %d did not close cleanly: %s", i, out)
                if i not in self.failed and first is None:
                    first = EngineReplicaError(i, out, action="close")
        if first is not None:
            raise first

    def end_session(self, session: str) -> None:
        """``session`` made its last call: its pin no longer counts as load."""
        if self.affinity is not None:
            self.affinity.end(session)

    def replica_stats(self) -> list[dict[str, Any]]:
        """Per replica: requests in flight, requests routed so far (``affine``: those that
        followed their session's pin), sessions pinned to it, sessions moved to it off a failed
        replica, why it failed (if it did), its prefix KV cache (hits, size: where it has one
        here); the gateway's ``/health`` shows them."""
        sessions = (self.affinity.per_replica(len(self.replicas)) if self.affinity is not None
                    else None)
        return [{"replica": i, "in_flight": self.outstanding[i], "requests": self.assigned[i],
                 "affine": self.affine[i], "sessions": sessions[i] if sessions is not None else 0,
                 "rerouted": self.rerouted[i],
                 "weight_version": r.weight_version, "failed": self.failed.get(i),
                 "prefix_cache": getattr(r, "prefix_cache_stats", lambda: None)()}
                for i, r in enumerate(self.replicas)]

    def token_counters(self) -> dict[str, int]:
        """The replicas' counters summed; empty unless every replica counts them here."""
        each: list[dict[str, int]] = [getattr(r, "token_counters", dict)()
                                      for r in self.replicas]
        if not each or not all(each):
            return {}
        return {k: sum(c.get(k, 0) for c in each) for k in each[0]}

    def describe(self) -> str:
        """One line for logs: how many replicas, of which kind, which are out."""
        kinds = sorted({type(r).__name__ for r in self.replicas})
        out = f" ({len(self.failed)} failed)" if self.failed else ""
        return f"{len(self.replicas)} engine replicas ({', '.join(kinds)}){out}"
