"""The ChatML / Qwen2.5-style chat template of rltune's tiny models.

Rendering rules (what the policy gateway relies on):

* ``tools`` → one system turn: the system message's text, a blank line, then a ``# Tools``
  block listing each tool schema as ``json.dumps`` output inside ``<tools></tools>``.
* an assistant message → ``<|im_start|>assistant\\n`` + content; each tool call follows as
  ``<tool_call>\\n{"name": "calculator", "arguments": {...}}\\n</tool_call>``, separated from
  non-empty content (and from the previous call) by one ``\\n``; then ``<|im_end|>\\n``.
  A string ``function.arguments`` (the OpenAI wire form) is written verbatim, a dict is dumped
  with ``json.dumps`` default separators. So a tool call the model generated and the gateway
  parsed renders back byte for byte (parse rule: content = text before the first
  ``<tool_call>`` minus one trailing ``\\n``).
* consecutive ``tool`` messages → one user turn, each result wrapped in
  ``\\n<tool_response>\\n…\\n</tool_response>``.
* ``add_generation_prompt`` → ``<|im_start|>assistant\\n``.

The template is prefix-stable: rendering ``messages[:k]`` with ``add_generation_prompt`` and
appending the generated text plus ``<|im_end|>`` gives an exact prefix of rendering the longer
conversation (tested in ``tests/models/test_chat_template.py``). Assistant turns are wrapped in
``{% generation %}`` so ``apply_chat_template(..., return_assistant_tokens_mask=True)`` works.
"""

from __future__ import annotations

from typing import Any

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
ENDOFTEXT, PAD = "<|endoftext|>", "<|pad|>"
TOOL_CALL_START, TOOL_CALL_END = "<tool_call>", "</tool_call>"
TOOL_RESPONSE_START, TOOL_RESPONSE_END = "<tool_response>", "</tool_response>"

#: Control tokens (skipped by ``decode(skip_special_tokens=True)``).
SPECIAL_TOKENS = (ENDOFTEXT, IM_START, IM_END, PAD)
#: Tool markup tokens: single tokens, but kept by ``skip_special_tokens`` so parsers see them.
TOOL_TOKENS = (TOOL_CALL_START, TOOL_CALL_END, TOOL_RESPONSE_START, TOOL_RESPONSE_END)

TOOLS_HEADER = "# Tools\nYou may call these functions:\n<tools>"
TOOLS_FOOTER = (
    "\n</tools>\nTo call one, reply with <tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)

# Jinja: `{%-` everywhere so that transformers' trim/lstrip settings change nothing.
CHAT_TEMPLATE = (
    "{%- macro text(content) -%}"
    "{%- if content is none -%}"
    "{%- elif content is string -%}{{- content -}}"
    "{%- else -%}{%- for part in content -%}"
    "{%- if part.type == 'text' -%}{{- part.text -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages and messages[0].role == 'system' -%}"
    "{{- text(messages[0].content) + '\\n\\n' -}}"
    "{%- endif -%}"
    "{{- " + repr(TOOLS_HEADER) + " -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- " + repr(TOOLS_FOOTER) + " + '<|im_end|>\\n' -}}"
    "{%- elif messages and messages[0].role == 'system' -%}"
    "{{- '<|im_start|>system\\n' + text(messages[0].content) + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- if message.role == 'system' and loop.first -%}"
    "{%- elif message.role == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}"
    "{{- '<|im_start|>user' -}}"
    "{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + text(message.content) + '\\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- elif message.role == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- generation -%}"
    "{%- set content = text(message.content) -%}"
    "{{- content -}}"
    "{%- for call in (message.tool_calls or []) -%}"
    "{%- set fn = call.function if call.function is defined else call -%}"
    "{%- if content or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>\\n{\"name\": ' + (fn.name | tojson) + ', \"arguments\": ' -}}"
    "{%- if fn.arguments is string -%}{{- fn.arguments -}}"
    "{%- else -%}{{- fn.arguments | tojson -}}{%- endif -%}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>' -}}"
    "{%- endgeneration -%}"
    "{{- '\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + text(message.content) + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def render_chat(
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = False,
) -> str:
    """Render ``messages`` with :data:`CHAT_TEMPLATE` without needing a tokenizer.

    Same output as ``tokenizer.apply_chat_template(messages, tools=tools, tokenize=False)``.

    Example:
        >>> render_chat([{"role": "user", "content": "hi"}], add_generation_prompt=True)
        '<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n'
    """
    from transformers.utils.chat_template_utils import render_jinja_template

    rendered, _ = render_jinja_template(
        conversations=[messages],
        tools=tools,
        chat_template=CHAT_TEMPLATE,
        add_generation_prompt=add_generation_prompt,
    )
    return rendered[0]


def assistant_token_mask(ids: list[int], header: list[int], end_id: int) -> list[int]:
    """1 on the tokens of every assistant turn of a rendered ChatML conversation, else 0.

    An assistant turn starts after its ``header`` (the tokens of ``<|im_start|>assistant\\n``)
    and ends with its ``<|im_end|>`` (``end_id``, included, so a model learns to stop); tool
    calls are inside the turn, tool results are not (they are a user/tool turn). The warm
    start's labels and SFT jobs' loss masks both come from here.

    Example:
        >>> assistant_token_mask([5, 1, 2, 7, 8, 9, 3, 5, 4, 3], header=[1, 2], end_id=3)
        [0, 0, 0, 1, 1, 1, 1, 0, 0, 0]
    """
    mask = [0] * len(ids)
    i, width = 0, len(header)
    while i < len(ids):
        if width and ids[i : i + width] == header:
            start = i + width
            end = ids.index(end_id, start) if end_id in ids[start:] else len(ids) - 1
            mask[start : end + 1] = [1] * (end + 1 - start)
            i = end + 1
        else:
            i += 1
    return mask
