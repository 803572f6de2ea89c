"""Run one rollout attempt end to end: key → user rollout → captured calls → token sequences.

Each attempt gets its own gateway key, so every token the policy samples for it is captured
under its rollout id. A FAILED status, a crash, or a rollout that never called the model is
retried up to ``max_retries`` times; after that the rollout is dropped and counted, never
scored.

The endpoint is the policy gateway (training, validation, evaluation) or an ``OpenEndpoint``:
any OpenAI-compatible server with one fixed key, where nothing is captured
(``rltune test-functions``); there a rollout that ran is a result without token sequences.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Optional, Protocol
from urllib.parse import urlsplit

import httpx

from rltune.config.data import DataRow
from rltune.functions.failures import PoolBroken
from rltune.gateway.capture import CapturedCall
from rltune.gateway.rows import build_rows
from rltune.observability.spans import rollout_span, trace_headers
from rltune.rollout.results import RolloutResult
from rltune.sdk.data import (
    AgentOutput,
    ModelResource,
    RequestMetadata,
    RolloutInput,
    RolloutOutput,
    TaskStatus,
    is_discard,
)

__all__ = ["BuiltinRollout", "OpenEndpoint", "PolicyEndpoint", "RolloutCaller", "RolloutRunner"]


class RolloutCaller(Protocol):
    """Something that runs a rollout: the function pool, or the built-in single-turn rollout."""

    async def call(
        self, input_data: Any, *, headers: Optional[dict[str, str]] = None
    ) -> RolloutOutput: ...


class PolicyEndpoint(Protocol):
    """Where rollouts sample: the policy gateway (``rltune.gateway.server.Gateway``)."""

    base_url: str

    def register(self, key: str, rollout_id: str, *, traceparent: Optional[str] = None,
                 session: Optional[str] = None) -> None: ...

    def unregister(self, key: str) -> None: ...

    def pop_calls(self, rollout_id: str) -> list[CapturedCall]: ...


class OpenEndpoint:
    """Any OpenAI-compatible server, reached with one fixed ``api_key``; captures nothing."""

    def __init__(self, base_url: str, api_key: str):
        self.base_url, self.api_key = base_url, api_key

    def register(self, key: str, rollout_id: str, *, traceparent: Optional[str] = None,
                 session: Optional[str] = None) -> None:
        pass

    def unregister(self, key: str) -> None:
        pass

    def pop_calls(self, rollout_id: str) -> list[CapturedCall]:
        return []


class BuiltinRollout:
    """The "model RL" rollout used when a job configures no rollout function: one chat call.

    It runs in the trainer's process and calls the trainer's own policy gateway, so a plain
    ``http://host:port`` endpoint is reached with the lean keep-alive client of
    :mod:`rltune.functions.http` (httpx's pool cost the shared event loop ~10x more per call);
    any other URL goes through httpx.
    """

    def __init__(self, timeout: float = 600.0):
        self.timeout = timeout
        self._http = httpx.AsyncClient(timeout=timeout)
        self._lean: dict[tuple[str, int], Any] = {}

    async def call(
        self, input_data: RolloutInput, *, headers: Optional[dict[str, str]] = None
    ) -> RolloutOutput:
        res = input_data.model_resource
        body: dict[str, Any] = {"model": res.model_name, "messages": input_data.messages}
        if input_data.tools:
            body["tools"] = input_data.tools
        thinking = getattr(input_data, "thinking", None)  # an extra field of the request
        if thinking is not None:
            body["thinking"] = thinking
        params = dict(input_data.sampling_params or {})
        params.pop("max_turns", None)
        params.pop("timeout", None)
        body.update(params)
        headers = {**(headers or {}),
                   "Authorization": f"Bearer {res.api_key.get_secret_value()}"}
        url = res.base_url.rstrip("/") + "/chat/completions"
        try:
            message = (await self._post(url, body, headers))["choices"][0]["message"]
        except Exception as exc:
            return RolloutOutput(status=TaskStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        message = {k: v for k, v in message.items() if v is not None}
        return RolloutOutput(
            agent_output=AgentOutput(
                messages=[*input_data.messages, message], rollout_extra=input_data.rollout_extra
            )
        )

    async def _post(self, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
        """POST ``body`` as JSON (waiting out 429s) and return the decoded JSON answer."""
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname or parts.port is None:
            resp = await post_with_backoff(self._http, url, json=body, headers=headers)
            resp.raise_for_status()
            return resp.json()
        from rltune.functions.http import WorkerHTTPClient

        key = (parts.hostname, parts.port)
        client = self._lean.get(key)
        if client is None:
            client = self._lean[key] = WorkerHTTPClient(*key)
        payload = json.dumps(body).encode()
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        status, _, data = await while_busy(lambda: client.exchange(
            "POST", path, payload, headers, timeout=self.timeout))
        if status >= 400:
            raise RuntimeError(f"HTTP {status} from {url}: {data[:500].decode(errors='replace')}")
        return json.loads(data)

    async def close(self) -> None:
        for client in self._lean.values():
            client.close()
        self._lean.clear()
        await self._http.aclose()


#: 429 answers a rollout's call waits out (``Retry-After``) before the attempt fails.
MAX_BUSY_RETRIES = 20


async def post_with_backoff(http: httpx.AsyncClient, url: str, *, json: Any,
                            headers: dict[str, str]) -> httpx.Response:
    """POST with httpx, waiting out the gateway's 429s (:func:`while_busy`)."""
    async def send() -> tuple[int, Any, httpx.Response]:
        resp = await http.post(url, json=json, headers=headers)
        return resp.status_code, resp.headers, resp

    resp: httpx.Response = (await while_busy(send))[2]
    return resp


async def while_busy(send: Callable[[], Awaitable[tuple[int, Any, Any]]]
                     ) -> tuple[int, Any, Any]:
    """Call ``send`` (answering status, headers, answer) again while the gateway answers 429
    (backpressure), waiting as its ``Retry-After`` advises, at most ``MAX_BUSY_RETRIES`` times;
    a refused call was never captured, so its retry is not counted twice."""
    for _ in range(MAX_BUSY_RETRIES):
        status, headers, answer = await send()
        if status != 429:
            break
        await asyncio.sleep(retry_after_s(headers))
    return status, headers, answer


def retry_after_s(headers: Any, default: float = 0.5) -> float:
    """The wait a 429 advises: ``retry-after-ms``, else ``Retry-After`` seconds, bounded."""
    try:
        if headers.get("retry-after-ms"):
            return min(30.0, max(0.0, float(headers["retry-after-ms"]) / 1000))
        if headers.get("retry-after"):
            return min(30.0, max(0.0, float(headers["retry-after"])))
    except ValueError:
        pass
    return default


def model_seconds(calls: list[CapturedCall]) -> float:
    """Seconds a rollout waited for the policy model: its calls' latencies (the choices of one
    ``n > 1`` call share one wait).

    >>> c = dict(rollout_id="r", prompt_ids=[], completion_ids=[], completion_logprobs=[],
    ...          finish_reason="stop")
    >>> model_seconds([CapturedCall(call_index=0, latency_s=0.5, **c),
    ...                CapturedCall(call_index=0, choice_index=1, latency_s=0.5, **c),
    ...                CapturedCall(call_index=1, latency_s=0.25, **c)])
    0.75
    """
    per_call: dict[int, float] = {}
    for call in calls:
        per_call[call.call_index] = max(per_call.get(call.call_index, 0.0), call.latency_s)
    return sum(per_call.values())


class RolloutRunner:
    """Runs rollout attempts against one endpoint with a caller (pool or built-in)."""

    def __init__(
        self,
        caller: RolloutCaller,
        gateway: PolicyEndpoint,
        *,
        job_id: str,
        model_name: str,
        sampling_params: dict[str, Any],
        max_retries: int,
    ):
        self.caller, self.gateway = caller, gateway
        self.job_id, self.model_name = job_id, model_name
        self.sampling_params = sampling_params
        self.max_retries = max_retries
        # an open endpoint: its own key, and no tokens to capture
        self.open = isinstance(gateway, OpenEndpoint)

    def _key(self) -> str:
        if isinstance(self.gateway, OpenEndpoint):
            return self.gateway.api_key
        return "rk-" + secrets.token_urlsafe(18)

    def _input(
        self, row: DataRow, rid: str, key: str, sample_id: str, attempt: int,
        traceparent: Optional[str] = None,
    ) -> RolloutInput:
        return RolloutInput(
            traceparent=traceparent,
            messages=row.message_dicts(),
            tools=row.tool_dicts(),
            ground_truth=row.ground_truth,
            rollout_extra=row.rollout_extra,
            sampling_params=dict(self.sampling_params),
            model_resource=ModelResource(
                model_name=self.model_name, base_url=self.gateway.base_url, api_key=key
            ),
            request_metadata=RequestMetadata(
                job_id=self.job_id, sample_id=sample_id, rollout_id=rid, attempt_id=str(attempt)
            ),
            **row.forwarded_fields(),
        )

    async def run(
        self, row: DataRow, *, rollout_id: str, sample_id: str, sample_index: int, row_index: int
    ) -> RolloutResult:
        """Run one rollout with retries; never raises for user or model failures."""
        errors: list[str] = []
        error_code: Optional[str] = None
        started = time.perf_counter()
        for attempt in range(self.max_retries + 1):
            rid = f"{rollout_id}.a{attempt}"
            key = self._key()
            with rollout_span(rid, sample_id, attempt) as traceparent:
                # one prompt's rollouts share its prefix: one engine replica serves them all
                self.gateway.register(key, rid, traceparent=traceparent, session=sample_id)
                try:
                    out = await self.caller.call(
                        self._input(row, rid, key, sample_id, attempt, traceparent),
                        headers=trace_headers(),
                    )
                except (asyncio.CancelledError, PoolBroken):
                    raise  # a pool that gave up fails the job, naming why
                except Exception as exc:  # a caller bug must not sink the step
                    out = RolloutOutput(
                        status=TaskStatus.FAILED, error=f"{type(exc).__name__}: {exc}"
                    )
                finally:
                    self.gateway.unregister(key)
            calls = self.gateway.pop_calls(rid)
            if is_discard(out):  # the rollout asks to drop its whole group: no retry
                return RolloutResult(
                    rollout_id=rid, sample_id=sample_id, sample_index=sample_index,
                    row_index=row_index, ok=False, attempts=attempt + 1, discarded=True,
                    error=f"discarded: {out.error}", attempt_errors=errors,
                    latency_s=time.perf_counter() - started)
            if out.status is TaskStatus.FAILED or out.agent_output is None:
                errors.append(out.error or "rollout returned no agent_output")
                error_code = getattr(out, "error_code", None)
                continue
            if out.agent_output.rollout_extra is None:  # the reward sees the row's extra
                out.agent_output.rollout_extra = row.rollout_extra
            built = build_rows(calls)
            rows = [r for r in built.rows if r.num_sampled > 0]
            if not rows and not self.open:
                errors.append("the rollout never called the policy model (no tokens to train on)")
                continue
            return RolloutResult(
                rollout_id=rid,
                sample_id=sample_id,
                sample_index=sample_index,
                row_index=row_index,
                ok=True,
                agent_output=out.agent_output,
                sequences=rows,
                num_calls=len({c.call_index for c in calls}),
                template_rewrites=built.template_rewrites,
                attempts=attempt + 1,
                attempt_errors=errors,
                latency_s=time.perf_counter() - started,
                model_latency_s=model_seconds(calls),
                traceparent=traceparent,
            )
        return RolloutResult(
            rollout_id=f"{rollout_id}.a{self.max_retries}",
            sample_id=sample_id,
            sample_index=sample_index,
            row_index=row_index,
            ok=False,
            attempts=self.max_retries + 1,
            error="; ".join(dict.fromkeys(errors)),
            attempt_errors=errors,
            error_code=error_code,
            latency_s=time.perf_counter() - started,
        )
