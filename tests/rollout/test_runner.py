"""The rollout runner's retries: every failed attempt's reason is kept in the rollout's record,
not only the count of attempts."""

from __future__ import annotations

import openai
import pytest

pytest.importorskip("torch")


@pytest.fixture
async def gateway(tiny_model_dir):
    from rltune.engine.transformers_engine import TransformersEngine
    from rltune.gateway import Gateway

    engine = TransformersEngine.from_pretrained(tiny_model_dir, threads=2)
    gw = await Gateway.start(engine)
    yield gw
    await gw.stop(close_engine=True)


async def test_a_retried_agents_sdk_rollout_keeps_its_first_attempts_reason(gateway):
    """An OpenAI Agents SDK rollout whose first attempt raises and whose second succeeds: the
    trajectory record says why the first failed (``attempt_errors``), next to ``attempts``."""
    agents = pytest.importorskip("agents")
    from rltune.config.data import DataRow
    from rltune.rollout.results import trajectory_record
    from rltune.rollout.runner import RolloutRunner
    from rltune.sdk import AbstractRolloutProcessor, AgentOutput, RolloutInput, RolloutOutput
    from rltune.sdk.processors import call_process

    agents.set_tracing_disabled(True)  # the SDK would export traces to OpenAI
    seen: list[str] = []

    class FlakyAgent(AbstractRolloutProcessor):
        async def process(self, input_data: RolloutInput) -> RolloutOutput:
            seen.append(input_data.request_metadata.attempt_id)
            if len(seen) == 1:
                raise ConnectionError("search backend refused the connection")
            res = input_data.model_resource
            client = openai.AsyncOpenAI(base_url=res.base_url,
                                        api_key=res.api_key.get_secret_value())
            # chat completions: the untrained model's cut-off answer is still an answer
            model = agents.OpenAIChatCompletionsModel(model=res.model_name, openai_client=client)
            agent = agents.Agent(name="a", instructions="be brief", model=model,
                                 model_settings=agents.ModelSettings(max_tokens=4))
            result = await agents.Runner.run(agent, "hi", max_turns=1)
            return RolloutOutput(agent_output=AgentOutput(messages=[
                *input_data.messages, {"role": "assistant", "content": result.final_output}]))

    class InProcess:
        processor = FlakyAgent()

        async def call(self, payload, headers=None):
            return await call_process(self.processor, payload)

    runner = RolloutRunner(InProcess(), gateway, job_id="j", model_name="tiny",
                           sampling_params={}, max_retries=2)
    row = DataRow(messages=[{"role": "user", "content": "hi"}])
    result = await runner.run(row, rollout_id="r", sample_id="s", sample_index=0, row_index=0)
    assert result.ok, result.error
    assert seen == ["0", "1"]
    rec = trajectory_record(result)
    assert rec["status"] == "success" and rec["attempts"] == 2 and rec["error"] is None
    assert rec["attempt_errors"] == ["ConnectionError: search backend refused the connection"]
