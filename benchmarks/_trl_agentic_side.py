"""TRL half of ``agentic_compare.py``: ``GRPOTrainer`` with its own tool loop.

``python _trl_agentic_side.py SPEC.json OUT.json`` (run by ``agentic_compare.py`` in its own
process). The calculator is an async Python tool that calls the same HTTP service as rltune's
rollout (TRL 1.16's ``_tool_call_loop`` runs the tool calls of a batch one rollout after
another, gathering async tools only within one rollout). Same model, prompts and tool schema
(the docstring below renders as rltune's ``CALCULATOR_TOOL``), exact-answer reward on the last
assistant message, batch 8 x 8, lr, steps, GRPO-style clipping, no KL; a failed tool call is
an error message the model reads, as on the rltune side.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _trl_side import _time_calls, agentic_config, agentic_result, step_clock


def http_calculator(url: str) -> Any:
    """TRL's ``calculator`` tool: an async function calling the HTTP service at ``url`` (a
    failed call is an error message the model reads, as in rltune's ``http_tool.py``)."""
    import httpx

    tool_url = url.rstrip("/") + "/calculator"
    http = httpx.AsyncClient(timeout=10.0)

    async def calculator(expression: str):  # no return type: the schema stays rltune's
        """Evaluate an arithmetic expression with + - * / and parentheses.

        Args:
            expression: for example 37 * 4
        """
        try:
            resp = await http.post(tool_url, json={"expression": str(expression)})
        except httpx.HTTPError as exc:
            return f"error: tool call failed: {type(exc).__name__}"
        if resp.status_code != 200:
            return f"error: tool service answered {resp.status_code}"
        return str(resp.json().get("result", ""))

    return calculator


def tool_tokenizer(model: str) -> Any:
    """The model's tokenizer, set up for TRL to parse its hermes ``<tool_call>`` blocks."""
    from trl.chat_template_utils import qwen3_template

    from rltune.models import load_tokenizer

    tok = load_tokenizer(model)
    tok.response_template = qwen3_template  # the nano template writes hermes <tool_call>s
    return tok


def run(spec: dict[str, Any]) -> dict[str, Any]:
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging
    from trl import GRPOTrainer

    from rltune.models.recipes import recipe_for
    from rltune.models.tasks import is_correct, make_dataset_rows

    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    torch.manual_seed(spec["seed"])
    calculator = http_calculator(spec["tool_url"])

    def exact_reward(completions: list, solution: list[str], **_: Any) -> list[float]:
        out = []
        for turns, truth in zip(completions, solution, strict=True):
            last = next((m.get("content") or "" for m in reversed(turns)
                         if m.get("role") == "assistant"), "")
            out.append(float(is_correct(str(last), truth)))
        return out

    tok = tool_tokenizer(spec["model"])
    task = recipe_for("nano").config.task
    rows = make_dataset_rows(spec["steps"] * spec["batch_size"], "train", seed=1, config=task)
    dataset = Dataset.from_dict({"prompt": [r["messages"] for r in rows],
                                 "solution": [r["rollout_extra"]["solution"] for r in rows]})
    model = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=torch.float32)

    clock = step_clock()
    with tempfile.TemporaryDirectory(prefix="trl-agentic-") as out_dir:
        config = agentic_config(spec, out_dir, spec["max_new_tokens"],
                                max_tool_calling_iterations=3)
        trainer = GRPOTrainer(model=model, reward_funcs=exact_reward, args=config,
                              train_dataset=dataset, processing_class=tok, tools=[calculator],
                              callbacks=[clock])
        generate_s = _time_calls(trainer, "_generate")
        t0 = time.perf_counter()
        trainer.train()
        train_s = time.perf_counter() - t0
    return agentic_result(clock, spec, train_s, generate_s)


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    Path(sys.argv[2]).write_text(json.dumps(run(spec)))


if __name__ == "__main__":
    main()
