"""The multi-hop agent of ``agentic_compare.py --task multihop`` (rltune's side) and its reward.

Per hop the agent asks the policy for a forced ``calculator`` call (``tool_choice`` names it:
the gateway writes the call's opening, the policy samples the query, and those forced tokens
train with mask 0), looks the query up through the MCP ``search`` tool of the corpus server
(``$MCP_URL``, one streamable-HTTP session per worker) and gives the policy the value found;
the next hop's question is built from that value (``multihop_task.next_question``). After the
chain's 3-6 hops the policy answers. The task and reward are in ``multihop_task.py``.
"""

from __future__ import annotations

import asyncio
import os

import httpx
from openai import AsyncOpenAI

from functions.multihop_task import (
    ANSWER_TOKENS,
    FORCED_TOOL,
    HOP_TOKENS,
    TOOLS,
    McpSearch,
    next_question,
    queries_in,
    query_of_call,
    score_parts,
    value_of,
)
from rltune.sdk import (
    AbstractRewardProcessor,
    AbstractRolloutProcessor,
    AgentOutput,
    Reward,
    RewardInput,
    RewardOutput,
    RolloutInput,
    RolloutOutput,
    TaskStatus,
)


class MultihopRollout(AbstractRolloutProcessor):
    async def setup(self) -> None:
        self.http = httpx.AsyncClient(timeout=120.0)
        self._ready, self._stop = asyncio.Event(), asyncio.Event()
        self._holder = asyncio.create_task(self._hold())
        waiter = asyncio.create_task(self._ready.wait())
        await asyncio.wait({waiter, self._holder}, return_when=asyncio.FIRST_COMPLETED)
        if self._holder.done():  # the MCP session failed to open: say why
            waiter.cancel()
            self._holder.result()

    async def _hold(self) -> None:
        """Own the MCP session in one task for the worker's life (anyio's task groups need it)."""
        async with McpSearch(os.environ["MCP_URL"]) as search:
            self.search = search
            self._ready.set()
            await self._stop.wait()

    async def process(self, input_data: RolloutInput) -> RolloutOutput:
        res = input_data.model_resource
        client = AsyncOpenAI(base_url=res.base_url, api_key=res.api_key.get_secret_value(),
                             http_client=self.http)
        params = {k: v for k, v in (input_data.sampling_params or {}).items()
                  if k not in ("max_turns", "timeout", "max_tokens", "max_completion_tokens")}
        chain = input_data.rollout_extra["chain"]
        messages = list(input_data.messages)
        counts = {"tool_calls": 0.0, "tool_failures": 0.0, "hops": float(chain["hops"])}
        found = None
        try:
            for hop in range(chain["hops"]):
                if hop:
                    messages.append({"role": "user", "content": next_question(chain, hop, found)})
                reply = (await client.chat.completions.create(
                    model=res.model_name, messages=messages, tools=TOOLS,
                    tool_choice=FORCED_TOOL, max_tokens=HOP_TOKENS, **params)).choices[0].message
                messages.append(reply.model_dump(exclude_none=True, exclude={"refusal"}))
                call = (reply.tool_calls or [None])[0]
                query = query_of_call(call.function.name, call.function.arguments) if call else ""
                passage, n = await self.search.search(query)
                counts["tool_calls"] += n
                counts["tool_failures"] += passage.startswith("error:")
                found = value_of(passage)
                messages.append({"role": "tool", "tool_call_id": call.id if call else "none",
                                 "content": found if found is not None else passage})
            reply = (await client.chat.completions.create(
                model=res.model_name, messages=messages, tools=TOOLS,
                max_tokens=ANSWER_TOKENS, **params)).choices[0].message
            messages.append(reply.model_dump(exclude_none=True, exclude={"refusal"}))
        except Exception as exc:  # the policy endpoint failed: retry this rollout
            return RolloutOutput(status=TaskStatus.FAILED, error=f"{type(exc).__name__}: {exc}")
        return RolloutOutput(agent_output=AgentOutput(
            messages=messages, rollout_extra=input_data.rollout_extra, rollout_metrics=counts))


class MultihopReward(AbstractRewardProcessor):
    def process(self, input_data: RewardInput) -> RewardOutput:
        out = input_data.agent_output
        chain = (out.rollout_extra or {})["chain"]
        messages = out.messages or []
        last = messages[-1] if messages else {}
        final = str(last.get("content") or "") if last.get("role") == "assistant" else ""
        share, ok = score_parts(chain, queries_in(messages), final)
        return RewardOutput(reward=Reward(reward_score=round(0.5 * share + 0.5 * ok, 6),
                                          reward_metrics={"hops_right": share,
                                                          "final_right": float(ok)}))
