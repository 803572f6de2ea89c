"""Tool-call parsers of gpt-oss (harmony), GLM-4.5, DeepSeek-V3/V3.1 and Kimi-K2 on outputs in
each family's documented format: calls, content, several calls, malformed output left as
content, the byte-exact round trip through a template written as the family's chat template
writes assistant calls, the streaming holdback, and the parser chosen by model family. Pure
Python: a character-level fake tokenizer stands in for a model."""

from __future__ import annotations

import json

import pytest

from rltune.engine.types import Completion, GenerationResult, TokenDelta
from rltune.gateway.chat import ChatService, _tool_holdback
from rltune.gateway.protocol import ChatCompletionRequest
from rltune.gateway.toolcalls import (
    DeepSeekV3ToolParser,
    Glm45ToolParser,
    GptOssToolParser,
    KimiK2ToolParser,
    Qwen3CoderToolParser,
    ToolParser,
    get_parser,
    parser_for_model_type,
    parser_name_for_model,
)


def calls(out) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in out.tool_calls]


def assert_malformed(parser: ToolParser, text: str) -> None:
    out = parser.parse(text)
    assert out.tool_calls == [] and out.content == text and out.error, (text, out)


def assert_streams_cleanly(parser: ToolParser, text: str) -> None:
    """Stream ``text`` a character at a time as chat.py does: what went out as content is
    always a prefix of the parsed content, and never any of the markup."""
    out = parser.parse(text)
    final = out.content or ""
    sent = 0
    for end in range(len(text) + 1):
        sent = max(sent, _tool_holdback(parser, text[:end]))
        assert final.startswith(text[:sent]), (text[:end], text[:sent], final)


# -- gpt-oss (harmony) ---------------------------------------------------------------------

GPT = GptOssToolParser()
ANALYSIS = "<|channel|>analysis<|message|>The user wants the weather. Call get_weather.<|end|>"
GPT_CALL = ("<|start|>assistant<|channel|>commentary to=functions.get_weather "
            '<|constrain|>json<|message|>{"location":"Tokyo","unit":"celsius"}<|call|>')


def test_gpt_oss_call_after_analysis():
    out = GPT.parse(ANALYSIS + GPT_CALL)
    assert out.error is None and out.content is None
    assert out.reasoning == "The user wants the weather. Call get_weather."
    assert calls(out) == [("get_weather", {"location": "Tokyo", "unit": "celsius"})]
    assert out.tool_calls[0].arguments == '{"location":"Tokyo","unit":"celsius"}'
    # the decoder dropped <|call|> (it is the end-of-generation token): still whole
    assert calls(GPT.parse(ANALYSIS + GPT_CALL.removesuffix("<|call|>"))) == calls(out)


def test_gpt_oss_final_answer_preamble_and_several_calls():
    out = GPT.parse(ANALYSIS + "<|start|>assistant<|channel|>final<|message|>It is 21 C.<|return|>")
    assert out.tool_calls == [] and out.content == "It is 21 C." and out.reasoning
    text = (ANALYSIS + "<|start|>assistant<|channel|>commentary<|message|>Checking both.<|end|>"
            + GPT_CALL + "<|start|>assistant<|channel|>commentary to=functions.get_time "
            "<|constrain|>json<|message|>{}<|call|>")
    out = GPT.parse(text)
    assert out.content == "Checking both." and out.error is None
    assert calls(out) == [("get_weather", {"location": "Tokyo", "unit": "celsius"}),
                          ("get_time", {})]
    # the role-header form (gpt-oss's chat template writes calls back that way)
    out = GPT.parse('<|start|>assistant to=functions.get_time<|channel|>commentary json'
                    '<|message|>{"tz": "UTC"}<|call|>')
    assert calls(out) == [("get_time", {"tz": "UTC"})]
    assert GPT.parse("plain text, no harmony").content == "plain text, no harmony"


def test_gpt_oss_malformed():
    for bad in ['<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a": <|call|>',
                "<|channel|>commentary to=functions.f <|constrain|>json<|message|>[1]<|call|>",
                '<|channel|>commentary to=browser.search<|message|>{"q": "x"}<|call|>',
                "<|channel|>final<|message|>ok<|end|> trailing words",
                ANALYSIS + "<|start|>assistant<|channel|>commentary to=functions.f",
                "<|start|>user<|message|>hi<|end|><|channel|>final<|message|>x"]:
        assert_malformed(GPT, bad)


def test_gpt_oss_forced_prefix_and_streaming():
    out = GPT.parse(GPT.forced_prefix("get_weather") + '{"location": "Oslo"}<|call|>')
    assert calls(out) == [("get_weather", {"location": "Oslo"})]
    out = GPT.parse(GPT.forced_prefix() + 'f <|constrain|>json<|message|>{"x": 1}<|call|>')
    assert calls(out) == [("f", {"x": 1})]
    assert GPT.holdback("<|chan") == 0 and GPT.holdback("Hi <|start|>assistant") == 3
    for text in (ANALYSIS + GPT_CALL, "Lead-in.\n" + GPT_CALL, "no markup at all"):
        assert_streams_cleanly(GPT, text)


# -- GLM-4.5 / 4.6 / 4.7 --------------------------------------------------------------------

GLM = Glm45ToolParser()
GLM_CALLS = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
             "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>\n"
             "<tool_call>get_time\n<arg_key>options</arg_key>\n"
             '<arg_value>{"tz": "Asia/Shanghai", "24h": true}</arg_value>\n</tool_call>')


def test_glm45_calls_content_and_typed_values():
    out = GLM.parse("Let me look both up.\n" + GLM_CALLS)
    assert out.error is None and out.content == "Let me look both up."
    assert calls(out) == [("get_weather", {"city": "Beijing", "days": 3}),
                          ("get_time", {"options": {"tz": "Asia/Shanghai", "24h": True}})]
    # GLM-4.7 writes no newlines; a call without arguments; a multi-line string value
    assert calls(GLM.parse("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris"
                           "</arg_value></tool_call>")) == [("get_weather", {"city": "Paris"})]
    assert calls(GLM.parse("<tool_call>now\n</tool_call>")) == [("now", {})]
    out = GLM.parse("<tool_call>write\n<arg_key>text</arg_key>\n<arg_value>a\nb\n</arg_value>\n"
                    "<arg_key>n</arg_key>\n<arg_value>NaN</arg_value>\n</tool_call>")
    assert calls(out) == [("write", {"text": "a\nb\n", "n": "NaN"})]


def test_glm45_malformed():
    for bad in ["<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris",
                "<tool_call>get_weather\n<arg_key>city</arg_key>\n</tool_call>",
                "<tool_call>\n<arg_key>city</arg_key>\n<arg_value>x</arg_value>\n</tool_call>",
                "<tool_call>get_weather please\n</tool_call>",
                '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>']:
        assert_malformed(GLM, bad)


def test_glm45_forced_prefix_and_streaming():
    out = GLM.parse(GLM.forced_prefix("get_weather") + "<arg_key>city</arg_key>\n"
                    "<arg_value>Rome</arg_value>\n</tool_call>")
    assert calls(out) == [("get_weather", {"city": "Rome"})]
    assert GLM.holdback("Sure <tool_") == len("Sure ")
    assert_streams_cleanly(GLM, "Let me look both up.\n" + GLM_CALLS)


# -- DeepSeek-V3 / V3.1 ----------------------------------------------------------------------

DS = DeepSeekV3ToolParser()
V31_CALLS = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
             '{"location": "Hangzhou"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time'
             '<｜tool▁sep｜>{"tz":"CST"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
V3_CALLS = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
            '```json\n{"location": "Hangzhou"}\n```<｜tool▁call▁end｜>\n'
            "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n"
            '```json\n{"tz":"CST"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>')


def test_deepseek_v31_and_v3_calls():
    for text in (V31_CALLS, V3_CALLS):
        out = DS.parse("I will check." + text)
        assert out.error is None and out.content == "I will check.", text
        assert calls(out) == [("get_weather", {"location": "Hangzhou"}),
                              ("get_time", {"tz": "CST"})]
        assert out.tool_calls[1].arguments == '{"tz":"CST"}'  # as written
        assert DS.parse(text).content is None
    # the decoder dropped <｜tool▁calls▁end｜>: still whole
    assert len(DS.parse(V31_CALLS.removesuffix("<｜tool▁calls▁end｜>")).tool_calls) == 2
    assert "▁" in V31_CALLS and "\u2581" in DS.start and "\uff5c" in DS.start


def test_deepseek_malformed():
    for bad in ["<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"a\": 1}",
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>[1]<｜tool▁call▁end｜>",
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f {}<｜tool▁call▁end｜>",
                "<｜tool▁calls▁begin｜>sorry",
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
                "<｜tool▁calls▁end｜> and more",
                "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜><｜tool▁sep｜>{}<｜tool▁call▁end｜>"]:
        assert_malformed(DS, bad)


def test_deepseek_forced_prefix_by_template_and_streaming():
    v3, v31 = DeepSeekV3ToolParser(), DeepSeekV3ToolParser()
    v3.bind(FamilyTokenizer(DEEPSEEK_V3_TEMPLATE))
    v31.bind(FamilyTokenizer(DEEPSEEK_V31_TEMPLATE))
    assert (v3.style, v31.style) == ("v3", "v31")
    out = v3.parse(v3.forced_prefix("f") + '{"x": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
    assert calls(out) == [("f", {"x": 1})]
    out = v31.parse(v31.forced_prefix("f") + '{"x": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>')
    assert calls(out) == [("f", {"x": 1})]
    assert DS.holdback("Sure <｜tool▁ca") == len("Sure ")
    assert_streams_cleanly(DS, "I will check.\n" + V3_CALLS)


# -- Kimi-K2 ---------------------------------------------------------------------------------

KIMI = KimiK2ToolParser()
KIMI_CALLS = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
              '<|tool_call_argument_begin|>{"city":"Beijing"}<|tool_call_end|>'
              "<|tool_call_begin|>functions.get_weather:1<|tool_call_argument_begin|>"
              '{"city": "Shanghai"}<|tool_call_end|><|tool_calls_section_end|>')


def test_kimi_k2_calls_ids_and_content():
    out = KIMI.parse("Checking both cities." + KIMI_CALLS)
    assert out.error is None and out.content == "Checking both cities."
    assert calls(out) == [("get_weather", {"city": "Beijing"}),
                          ("get_weather", {"city": "Shanghai"})]
    assert [c.id for c in out.tool_calls] == ["functions.get_weather:0", "functions.get_weather:1"]
    assert out.tool_calls[0].arguments == '{"city":"Beijing"}'
    # the singular section token some checkpoints write, and a name with a dot
    out = KIMI.parse("<|tool_call_section_begin|><|tool_call_begin|>functions.mcp.search:3"
                     '<|tool_call_argument_begin|>{"q": "x"}<|tool_call_end|>'
                     "<|tool_call_section_end|>")
    assert calls(out) == [("mcp.search", {"q": "x"})] and out.tool_calls[0].id.endswith(":3")


def test_kimi_k2_malformed():
    for bad in ["<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
                '<|tool_call_argument_begin|>{"a": 1}',
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.f"
                "<|tool_call_argument_begin|>{}<|tool_call_end|>",
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
                "<|tool_call_argument_begin|>not json<|tool_call_end|>",
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0{}<|tool_call_end|>",
                "<|tool_calls_section_begin|><|tool_calls_section_end|>"]:
        assert_malformed(KIMI, bad)


def test_kimi_k2_forced_prefix_and_streaming():
    out = KIMI.parse(KIMI.forced_prefix("f") + '0<|tool_call_argument_begin|>{"x": 1}'
                     "<|tool_call_end|><|tool_calls_section_end|>")
    assert calls(out) == [("f", {"x": 1})] and out.tool_calls[0].id == "functions.f:0"
    assert KIMI.holdback("Sure <|tool_call_sec") == len("Sure ")
    assert KIMI.holdback("Sure <|tool_calls_sec") == len("Sure ")
    assert_streams_cleanly(KIMI, "Checking both cities." + KIMI_CALLS)


# -- the byte-exact round trip: parse, send back, render with the family's template ---------

# Each template below renders user and assistant turns as the family's own chat template does
# (the same markup, the same test of string arguments); the prompt's tail is the generation
# prompt, so the model's output follows it in the next call's prompt.
GLM45_TEMPLATE = """{%- for m in messages -%}
{%- if m.role == 'user' -%}<|user|>
{{ m.content }}
{%- elif m.role == 'assistant' -%}<|assistant|>
{%- if m.content and m.content.strip() -%}
{{ '\\n' + m.content.strip() }}
{%- endif -%}
{% if m.tool_calls %}
{% for tc in m.tool_calls %}
{%- if tc.function %}
    {%- set tc = tc.function %}
{%- endif %}
{{ '\\n<tool_call>' + tc.name }}
{% set _args = tc.arguments %}
{% for k, v in _args.items() %}
<arg_key>{{ k }}</arg_key>
<arg_value>{{ v | tojson(ensure_ascii=False) if v is not string else v }}</arg_value>
{% endfor %}
</tool_call>{% endfor %}
{% endif %}
{%- elif m.role == 'tool' -%}<|observation|>
{{ m.content }}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}"""

DEEPSEEK_V31_TEMPLATE = """{%- for message in messages -%}
{%- if message['role'] == 'user' -%}{{ '<｜User｜>' + message['content'] }}
{%- elif message['role'] == 'assistant' -%}{{ '<｜Assistant｜></think>' }}
{%- for tool in message['tool_calls'] -%}
{%- if loop.first -%}{{ (message['content'] or '') + '<｜tool▁calls▁begin｜>' }}{%- endif -%}
{{ '<｜tool▁call▁begin｜>' + tool['function']['name'] + '<｜tool▁sep｜>' \
+ tool['function']['arguments'] + '<｜tool▁call▁end｜>' }}
{%- endfor -%}{{ '<｜tool▁calls▁end｜><｜end▁of▁sentence｜>' }}
{%- elif message['role'] == 'tool' -%}{{ '<｜tool▁output▁begin｜>' + message['content'] }}
{%- endif -%}
{%- endfor -%}""".replace("\\\n", "")

DEEPSEEK_V3_TEMPLATE = """{%- for message in messages -%}
{%- if message['role'] == 'user' -%}{{ '<｜User｜>' + message['content'] }}
{%- elif message['role'] == 'assistant' -%}{{ '<｜Assistant｜>' }}
{%- for tool in message['tool_calls'] -%}
{%- if loop.first -%}{{ (message['content'] or '') + '<｜tool▁calls▁begin｜>' }}
{%- else -%}{{ '\\n' }}{%- endif -%}
{{ '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] \
+ '\\n' + '```json' + '\\n' + tool['function']['arguments'] + '\\n' + '```' \
+ '<｜tool▁call▁end｜>' }}
{%- endfor -%}{{ '<｜tool▁calls▁end｜><｜end▁of▁sentence｜>' }}
{%- endif -%}
{%- endfor -%}""".replace("\\\n", "")

KIMI_K2_TEMPLATE = """{%- for message in messages -%}
{%- if message['role'] == 'user' -%}<|im_user|>user<|im_middle|>{{ message['content'] }}<|im_end|>
{%- elif message['role'] == 'assistant' -%}<|im_assistant|>assistant<|im_middle|>
  {%- if message['content'] -%}{{ message['content'] }}{%- endif -%}
  {%- if message.get('tool_calls') -%}
    <|tool_calls_section_begin|>
    {%- for tool_call in message['tool_calls'] -%}
      <|tool_call_begin|>{{ tool_call['id'] }}<|tool_call_argument_begin|>
      {%- if tool_call['function']['arguments'] is string -%}
        {{ tool_call['function']['arguments'] }}
      {%- else -%}{{ tool_call['function']['arguments'] | tojson }}{%- endif -%}
      <|tool_call_end|>
    {%- endfor -%}
    <|tool_calls_section_end|>
  {%- endif -%}<|im_end|>
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}"""


class FamilyTokenizer:
    """One token per character, rendering with ``template`` as transformers does."""

    eos_token_id = 0

    def __init__(self, template: str):
        self.chat_template = template

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [1000 + ord(ch) for ch in text]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(chr(t - 1000) for t in ids if t >= 1000)

    def apply_chat_template(self, messages, tools=None, tokenize=False,
                            add_generation_prompt=True, **kwargs) -> str:
        from transformers.utils.chat_template_utils import render_jinja_template

        rendered, _ = render_jinja_template(conversations=[messages], tools=tools,
                                            chat_template=self.chat_template,
                                            add_generation_prompt=add_generation_prompt)
        return rendered[0]


class ScriptedEngine:
    """Answers every request with ``script`` (one token per character)."""

    model_name, max_context, weight_version = "scripted", 4096, 0

    def __init__(self, tokenizer: FamilyTokenizer, script: str = ""):
        self.tokenizer, self.script = tokenizer, script

    def _completion(self) -> Completion:
        ids = self.tokenizer.encode(self.script)
        return Completion(completion_ids=ids, logprobs=[-0.1] * len(ids), finish_reason="stop")

    async def generate_one(self, request) -> GenerationResult:
        return GenerationResult(prompt_ids=request.prompt_ids, completions=[self._completion()])

    async def stream(self, request):
        c = self._completion()
        for k, t in enumerate(c.completion_ids):
            last = k == len(c.completion_ids) - 1
            yield TokenDelta(token_ids=[t], logprobs=[-0.1], finished=c if last else None)


WEATHER_TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
QUESTION = {"role": "user", "content": "Weather?"}


@pytest.mark.parametrize(("parser", "template", "before", "generated"), [
    (Glm45ToolParser(), GLM45_TEMPLATE, "<|assistant|>\n", "Let me look both up.\n" + GLM_CALLS),
    (DeepSeekV3ToolParser(), DEEPSEEK_V31_TEMPLATE, "<｜Assistant｜></think>",
     "I will check." + V31_CALLS),
    (DeepSeekV3ToolParser(), DEEPSEEK_V3_TEMPLATE, "<｜Assistant｜>", V3_CALLS),
    (KimiK2ToolParser(), KIMI_K2_TEMPLATE, "<|im_assistant|>assistant<|im_middle|>",
     "Checking both cities." + KIMI_CALLS),
], ids=["glm45", "deepseek_v31", "deepseek_v3", "kimi_k2"])
def test_parsed_calls_render_back_byte_for_byte(parser, template, before, generated):
    tok = FamilyTokenizer(template)
    svc = ChatService(ScriptedEngine(tok), parser)
    out = parser.parse(generated)
    assert out.error is None and len(out.tool_calls) == 2
    sent_back = {"role": "assistant", "content": out.content, "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in out.tool_calls]}
    req = ChatCompletionRequest(messages=[QUESTION, sent_back], tools=[WEATHER_TOOL])
    rendered = tok.apply_chat_template(svc.prepare(req).messages, add_generation_prompt=False)
    assert rendered.startswith(tok.apply_chat_template([QUESTION], add_generation_prompt=False))
    assert before + generated in rendered, rendered


def test_template_argument_styles():
    string_args = {t: ChatService(ScriptedEngine(FamilyTokenizer(t)), GLM).string_arguments
                   for t in (GLM45_TEMPLATE, DEEPSEEK_V3_TEMPLATE, DEEPSEEK_V31_TEMPLATE,
                             KIMI_K2_TEMPLATE)}
    # DeepSeek joins arguments with '+', Kimi tests "is string": both get the text as sampled
    assert string_args == {GLM45_TEMPLATE: False, DEEPSEEK_V3_TEMPLATE: True,
                           DEEPSEEK_V31_TEMPLATE: True, KIMI_K2_TEMPLATE: True}


def test_gpt_oss_arguments_survive_the_shipped_templates_rewrite():
    # gpt-oss's chat template writes a call back with the recipient in the role header and
    # without <|constrain|>: the arguments come back byte for byte, the header does not
    header_form = ("<|start|>assistant to=functions.get_weather<|channel|>commentary json"
                   '<|message|>{"location":"Tokyo","unit":"celsius"}<|call|>')
    again = GPT.parse(header_form).tool_calls
    first = GPT.parse(ANALYSIS + GPT_CALL).tool_calls
    assert [(c.name, c.arguments) for c in again] == [(c.name, c.arguments) for c in first]


async def test_gpt_oss_reasoning_and_content_reach_responses_and_streams():
    tok = FamilyTokenizer("{{ messages[0]['content'] }}")
    script = ANALYSIS + "<|start|>assistant<|channel|>final<|message|>Sunny.<|return|>"
    engine = ScriptedEngine(tok, script)
    svc = ChatService(engine, GptOssToolParser())
    p = svc.prepare(ChatCompletionRequest(messages=[QUESTION], tools=[WEATHER_TOOL]))
    result = await engine.generate_one(svc.engine_request(p))
    resp, _ = svc.response(p, result.completions)
    msg = resp.choices[0].message
    assert (msg.content, msg.reasoning_content) == (
        "Sunny.", "The user wants the weather. Call get_weather.")
    chunks = [c async for c in svc.stream_chunks(p, lambda *a: None)]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("content") or "" for d in deltas) == "Sunny."
    assert deltas[-1]["reasoning_content"] == msg.reasoning_content
    # without tools, a harmony reply is still read for its channels (never raw markup)
    bare = svc.prepare(ChatCompletionRequest(messages=[QUESTION]))
    resp, _ = svc.response(bare, result.completions)
    assert resp.choices[0].message.content == "Sunny." and resp.choices[0].message.reasoning_content
    chunks = [c async for c in svc.stream_chunks(bare, lambda *a: None)]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "Sunny."
    engine.script = ANALYSIS + GPT_CALL
    chunks = [c async for c in svc.stream_chunks(p, lambda *a: None)]
    final = chunks[-1]["choices"][0]
    assert final["finish_reason"] == "tool_calls" and "content" not in final["delta"]
    assert final["delta"]["tool_calls"][0]["function"]["arguments"] == (
        '{"location":"Tokyo","unit":"celsius"}')


# -- choosing a parser by model family -------------------------------------------------------

@pytest.mark.parametrize(("model_type", "architecture", "cls"), [
    ("gpt_oss", "GptOssForCausalLM", GptOssToolParser),
    ("glm4_moe", "Glm4MoeForCausalLM", Glm45ToolParser),
    ("deepseek_v3", "DeepseekV3ForCausalLM", DeepSeekV3ToolParser),
    ("kimi_k2", None, KimiK2ToolParser),
    ("qwen3_5", "Qwen3_5ForConditionalGeneration", Qwen3CoderToolParser),
    ("qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration", Qwen3CoderToolParser)])
def test_family_and_architecture_tables(model_type, architecture, cls):
    assert type(parser_for_model_type(model_type)) is cls
    if architecture:
        assert type(get_parser(parser_name_for_model("a_finetune", [architecture]))) is cls
    # Kimi-K2 says kimi_k2 although its architecture is DeepSeek-V3's
    assert parser_name_for_model("kimi_k2", ["DeepseekV3ForCausalLM"]) == "kimi_k2"
