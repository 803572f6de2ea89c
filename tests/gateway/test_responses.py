"""`POST /v1/responses` (the Responses API): the openai client against a real gateway, and an
OpenAI Agents SDK agent with a function tool run as a rollout whose calls merge into one
token-exact training row."""

from __future__ import annotations

import json

import openai
import pytest

from rltune.models.tasks import CALCULATOR_TOOL, SYSTEM_PROMPT, calculate

TOOL = {"type": "function", "name": "calculator", "strict": False,
        "description": CALCULATOR_TOOL["function"]["description"],
        "parameters": CALCULATOR_TOOL["function"]["parameters"]}


async def test_responses_plumbing_tiny(gateway):
    gateway.register("resp-key", "resp")
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="resp-key")
    r = await client.responses.create(model="policy", input="hello", instructions="be brief",
                                      max_output_tokens=5, temperature=0)
    assert r.status in ("completed", "incomplete") and r.usage.output_tokens <= 5
    assert r.output[0].type == "message" and r.output_text == r.output[0].content[0].text
    # a function call and its output come back as items and render as a tool exchange
    r = await client.responses.create(
        model="policy", tools=[TOOL], tool_choice="required", max_output_tokens=5, input=[
            {"role": "user", "content": [{"type": "input_text", "text": "2 + 3?"}]},
            {"type": "function_call", "call_id": "c1", "name": "calculator",
             "arguments": '{"expression": "2 + 3"}'},
            {"type": "function_call_output", "call_id": "c1", "output": "5"}])
    calls = gateway.pop_calls("resp")
    assert len(calls) == 2
    assert [m["role"] for m in calls[1].messages] == ["user", "assistant", "tool"]
    assert calls[1].messages[1]["tool_calls"][0]["id"] == "c1"
    assert calls[1].tools[0]["function"]["name"] == "calculator"
    assert "strict" not in calls[1].tools[0]["function"]
    assert calls[1].sampling["max_tokens"] == 5


@pytest.mark.parametrize("extra, field", [
    ({"previous_response_id": "resp_1"}, "previous_response_id"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"text": {"format": {"type": "json_object"}}}, "text.format"),
    ({"extra_body": {"frequency_penalty": 1.0}}, "frequency_penalty"),
])
async def test_unsupported_fields_are_refused_by_name(gateway, extra, field):
    client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key="serve-key")
    with pytest.raises(openai.BadRequestError) as err:
        await client.responses.create(model="policy", input="hi", **extra)
    assert field in str(err.value)


@pytest.fixture
async def nano_gateway(nano_model_dir):
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway import Gateway

    engine = TransformersEngine.from_pretrained(nano_model_dir, threads=2)
    gw = await Gateway.start(engine)
    yield gw
    await gw.stop(close_engine=True)


async def test_agents_sdk_rollout_is_one_exact_row(nano_gateway, nano_model_dir):
    agents = pytest.importorskip("agents")
    from rltune.config.data import DataRow
    from rltune.models import load_tokenizer
    from rltune.rollout.runner import RolloutRunner
    from rltune.sdk import AbstractRolloutProcessor, AgentOutput, RolloutInput, RolloutOutput
    from rltune.sdk.processors import call_process

    agents.set_tracing_disabled(True)  # the SDK would export traces to OpenAI

    tool_outputs: list[str] = []

    async def run_calculator(ctx, args: str) -> str:
        tool_outputs.append(calculate(json.loads(args)["expression"]))
        return tool_outputs[-1]

    calculator = agents.FunctionTool(
        name="calculator", description=TOOL["description"], params_json_schema=TOOL["parameters"],
        on_invoke_tool=run_calculator, strict_json_schema=False)

    class AgentsRollout(AbstractRolloutProcessor):
        """A rollout whose agent is the OpenAI Agents SDK's, on the Responses API."""

        async def process(self, input_data: RolloutInput) -> RolloutOutput:
            res = input_data.model_resource
            client = openai.AsyncOpenAI(base_url=res.base_url,
                                        api_key=res.api_key.get_secret_value())
            agent = agents.Agent(
                name="calc", instructions=input_data.messages[0]["content"],
                tools=[calculator],
                model=agents.OpenAIResponsesModel(model=res.model_name, openai_client=client),
                model_settings=agents.ModelSettings(tool_choice="required", temperature=0,
                                                    max_tokens=48))
            result = await agents.Runner.run(agent, input_data.messages[-1]["content"],
                                             max_turns=4)
            items = result.to_input_list()
            return RolloutOutput(agent_output=AgentOutput(
                messages=[*input_data.messages, {"role": "assistant",
                                                 "content": result.final_output}],
                rollout_metrics={"items": float(len(items))}))

    class InProcess:
        def __init__(self):
            self.processor = AgentsRollout()

        async def call(self, payload, headers=None):
            return await call_process(self.processor, payload)

    runner = RolloutRunner(InProcess(), nano_gateway, job_id="j", model_name="nano",
                           sampling_params={}, max_retries=0)
    row = DataRow(messages=[{"role": "system", "content": SYSTEM_PROMPT},
                            {"role": "user", "content": "What is 7 * 8?"}])
    result = await runner.run(row, rollout_id="r", sample_id="s", sample_index=0, row_index=0)
    assert result.ok, result.error
    assert result.num_calls >= 2  # the tool call, then the answer after the tool result
    assert result.template_rewrites == 0 and len(result.sequences) == 1
    assert tool_outputs, "the agent never ran its tool"
    assert result.agent_output.messages[-1]["content"]  # the answer after the tool result
    row_ = result.sequences[0]
    # the tool's output went back to the model inside the same row (whether the tiny model
    # then copies it right depends on its build, so the answer's digits are not asserted)
    assert tool_outputs[-1] in load_tokenizer(nano_model_dir).decode(row_.input_ids)
    picked = [t for t, m in zip(row_.input_ids, row_.loss_mask, strict=True) if m]
    assert len(picked) == result.response_tokens and row_.num_sampled == len(picked)
