"""Tool-call parsers: model output text → OpenAI ``tool_calls``, one parser per model family
(one module each: ``hermes``, ``llama3_json``, ``mistral``, ``qwen3_coder``, ``gpt_oss``,
``glm45``, ``deepseek_v3``, ``kimi_k2``; ``registry`` names them and maps model families to
them; ``base`` holds what they share).

Built-in parsers (pick one by name with :func:`get_parser`, or by the model's
``config.model_type`` with :func:`parser_for_model_type`):

``hermes`` (Qwen2/2.5/3, Hermes, rltune's tiny models)::

    optional content
    <tool_call>
    {"name": "calculator", "arguments": {"expression": "2 + 3"}}
    </tool_call>

``llama3_json`` (Llama 3.1/3.2/3.3): a JSON object, optionally after ``<|python_tag|>``;
several are separated by ``;`` or newlines::

    {"name": "calculator", "parameters": {"expression": "2 + 3"}}

``mistral``: ``[TOOL_CALLS]`` and a JSON list (Mistral 7B v0.3, Mixtral, Nemo, Small 3), or
one ``[TOOL_CALLS]name[ARGS]{...}`` per call (tokenizer v11+: Mistral Small 3.2, Devstral)::

    [TOOL_CALLS] [{"name": "calculator", "arguments": {"expression": "2 + 3"}}]

``qwen3_coder`` (Qwen3-Coder's and Qwen3.5's XML)::

    <tool_call>
    <function=calculator>
    <parameter=expression>
    2 + 3
    </parameter>
    </function>
    </tool_call>

``gpt_oss`` (OpenAI harmony: channels; ``analysis`` is the reasoning, ``final`` the content)::

    <|channel|>analysis<|message|>Need to add.<|end|><|start|>assistant
    <|channel|>commentary to=functions.calculator <|constrain|>json<|message|>
    {"expression": "2 + 3"}<|call|>        (one line: broken here to fit)

``glm45`` (GLM-4.5/4.6/4.7)::

    <tool_call>calculator
    <arg_key>expression</arg_key>
    <arg_value>2 + 3</arg_value>
    </tool_call>

``deepseek_v3`` (DeepSeek-V3.1; V3's ``function<｜tool▁sep｜>NAME`` and json code fence too)::

    <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>calculator<｜tool▁sep｜>
    {"expression": "2 + 3"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>        (one line)

``kimi_k2`` (Kimi-K2; ``functions.NAME:IDX`` is the call's id)::

    <|tool_calls_section_begin|><|tool_call_begin|>functions.calculator:0
    <|tool_call_argument_begin|>{"expression": "2 + 3"}<|tool_call_end|>
    <|tool_calls_section_end|>        (one line)

Malformed tool-call markup is never an error: the parser returns the whole text as content and
says why in ``error`` (the gateway counts it). ``arguments`` is always JSON text of an object.
For Hermes, ``arguments`` is the exact JSON text the model wrote whenever the block has the
canonical shape, so that a client sending the call back renders (through a template that writes
string arguments verbatim) to the same tokens.

A parser's ``markers`` are special tokens its markup uses (Mistral's ``[TOOL_CALLS]``): the chat
service keeps them when it decodes completions, which otherwise drops special tokens.

Register parsers for other families with :func:`register_parser`.

Example:
    >>> p = get_parser("hermes")
    >>> out = p.parse('Let me compute.\\n<tool_call>\\n{"name": "calc", "arguments": '
    ...               '{"x": 1}}\\n</tool_call>')
    >>> out.content, out.tool_calls[0].name, out.tool_calls[0].arguments
    ('Let me compute.', 'calc', '{"x": 1}')
    >>> p.parse("<tool_call>{oops</tool_call>").error is not None
    True
    >>> llama = get_parser("llama3_json").parse('{"name": "calc", "parameters": {"x": 1}}')
    >>> llama.tool_calls[0].arguments
    '{"x": 1}'
"""


from rltune.gateway.toolcalls.base import (
    ParsedOutput,
    ParsedToolCall,
    TaggedBlockParser,
    ToolParser,
    special_token_ids,
)
from rltune.gateway.toolcalls.deepseek_v3 import DeepSeekV3ToolParser
from rltune.gateway.toolcalls.glm45 import Glm45ToolParser
from rltune.gateway.toolcalls.gpt_oss import GptOssToolParser
from rltune.gateway.toolcalls.hermes import HermesToolParser
from rltune.gateway.toolcalls.kimi_k2 import KimiK2ToolParser
from rltune.gateway.toolcalls.llama3_json import Llama3JsonToolParser
from rltune.gateway.toolcalls.mistral import MistralToolParser
from rltune.gateway.toolcalls.qwen3_coder import Qwen3CoderToolParser
from rltune.gateway.toolcalls.registry import (
    BUILTIN_PARSERS,
    HOW_TO_CHOOSE,
    UnknownParserError,
    get_parser,
    parser_for_model_type,
    parser_name_for_model,
    parser_name_for_model_dir,
    register_parser,
)

__all__ = [
    "BUILTIN_PARSERS", "HOW_TO_CHOOSE", "DeepSeekV3ToolParser", "Glm45ToolParser",
    "GptOssToolParser", "HermesToolParser", "KimiK2ToolParser", "Llama3JsonToolParser",
    "MistralToolParser", "ParsedOutput", "ParsedToolCall", "Qwen3CoderToolParser",
    "TaggedBlockParser", "ToolParser", "UnknownParserError", "get_parser",
    "parser_for_model_type", "parser_name_for_model", "parser_name_for_model_dir",
    "register_parser", "special_token_ids",
]
