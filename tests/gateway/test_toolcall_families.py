"""Tool-call parsers of real model families (llama3_json, mistral, qwen3_coder, hermes) on
outputs written in each family's documented format; parser choice by model family, the
unknown-family error, the job-config key and ``rltune serve --tool-parser``. Pure Python: a
character-level fake tokenizer and a scripted fake engine stand in for a model."""

from __future__ import annotations

import json
import typing
from types import SimpleNamespace

import pytest

from rltune.config import JobConfig, load_job_config_text
from rltune.config.job import ToolCallParserName
from rltune.engine.types import Completion, GenerationResult, TokenDelta
from rltune.gateway.chat import ChatService, _tool_holdback
from rltune.gateway.protocol import ChatCompletionRequest
from rltune.gateway.toolcalls import (
    BUILTIN_PARSERS,
    HermesToolParser,
    Llama3JsonToolParser,
    MistralToolParser,
    Qwen3CoderToolParser,
    ToolParser,
    UnknownParserError,
    get_parser,
    parser_for_model_type,
    parser_name_for_model,
)
from rltune.sdk.errors import ConfigError


def args(call) -> dict:
    return json.loads(call.arguments)


def calls(out) -> list[tuple[str, dict]]:
    return [(c.name, args(c)) for c in out.tool_calls]


def assert_malformed(parser: ToolParser, text: str) -> None:
    out = parser.parse(text)
    assert out.tool_calls == [] and out.content == text and out.error, (text, out)


def assert_streams_cleanly(parser: ToolParser, text: str) -> None:
    """Stream ``text`` one character at a time as chat.py does: what was sent as content is
    always a prefix of the parsed content, and never any of the tool markup."""
    out = parser.parse(text)
    final = out.content or "" if out.tool_calls else text
    sent = 0
    for end in range(len(text) + 1):
        safe = _tool_holdback(parser, text[:end])
        if safe > sent:
            sent = safe
        assert final.startswith(text[:sent]), (text[:end], text[:sent], final)


# -- llama3_json ---------------------------------------------------------------------------

LLAMA = Llama3JsonToolParser()


def test_llama3_single_call_as_the_llama31_template_asks():
    out = LLAMA.parse('{"name": "get_current_weather", "parameters": '
                      '{"location": "San Francisco, CA", "unit": "fahrenheit"}}')
    assert out.error is None and out.content is None
    assert calls(out) == [("get_current_weather",
                           {"location": "San Francisco, CA", "unit": "fahrenheit"})]
    assert out.tool_calls[0].id.startswith("call_")


def test_llama3_python_tag_and_arguments_key():
    # Llama 3.2 1B/3B often starts with <|python_tag|> (kept when decoding with specials)
    # and sometimes writes "arguments" instead of "parameters".
    out = LLAMA.parse('<|python_tag|>{"name": "search", "arguments": {"query": "rltune"}}')
    assert out.error is None and calls(out) == [("search", {"query": "rltune"})]
    out = LLAMA.parse('{"name": "calc", "parameters": "{\\"x\\": 2}"}')  # args as a string
    assert calls(out) == [("calc", {"x": 2})]
    assert calls(LLAMA.parse('{"name": "now", "parameters": {}}')) == [("now", {})]


def test_llama3_2_type_function_key_first():
    # Llama 3.2 1B/3B frequently put "type": "function" before the name (as in the tool
    # schema they were shown); vLLM's llama3_json parser accepts it too.
    text = '{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}'
    for variant in (text, text.replace('": ', '":').replace(", ", ","),
                    "<|python_tag|>" + text, "Checking.\n" + text):
        out = LLAMA.parse(variant)
        assert out.error is None and calls(out) == [("get_weather", {"city": "Paris"})], variant
    assert LLAMA.parse("Checking.\n" + text).content == "Checking."
    for plain in ('{"type": "object"}', '{"type": "function"} is a schema'):
        assert LLAMA.parse(plain).content == plain and LLAMA.parse(plain).error is None
        assert_streams_cleanly(LLAMA, plain)
    assert_streams_cleanly(LLAMA, "Checking.\n" + text)


def test_llama3_several_calls_separated_by_semicolons_or_newlines():
    a = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    b = '{"name": "get_weather", "parameters": {"city": "Tokyo"}}'
    for text in (f"{a}; {b}", f"{a};{b}", f"{a}\n{b}", f"<|python_tag|>{a}; <|python_tag|>{b}"):
        out = LLAMA.parse(text)
        assert out.error is None, text
        assert calls(out) == [("get_weather", {"city": "Paris"}),
                              ("get_weather", {"city": "Tokyo"})]
        assert out.tool_calls[0].id != out.tool_calls[1].id


def test_llama3_content_before_the_call():
    out = LLAMA.parse('Let me look that up.\n{"name": "search", "parameters": {"q": "x"}}')
    assert out.content == "Let me look that up." and calls(out) == [("search", {"q": "x"})]
    out = LLAMA.parse('Checking. <|python_tag|>{"name": "search", "parameters": {"q": "x"}}')
    assert out.content == "Checking. " and calls(out) == [("search", {"q": "x"})]


def test_llama3_plain_text_with_braces_is_content():
    for text in ("The set {1, 2} has two elements.", 'He said {"name": "Bob"} inline.',
                 '{"result": 42}', "plain answer"):
        out = LLAMA.parse(text)
        assert out.content == text and out.tool_calls == [] and out.error is None


def test_llama3_malformed():
    for bad in ['{"name": "get_weather", "parameters": {"city": "Paris"}',  # cut off
                '{"name": "get_weather"}',  # no parameters
                '{"name": "get_weather", "parameters": ["Paris"]}',
                '{"name": 7, "parameters": {}}',
                '{"name": "f", "parameters": {}} and then some prose',
                '<|python_tag|>brave_search.call(query="weather")',  # built-in tool syntax
                "<|python_tag|>"]:
        assert_malformed(LLAMA, bad)


def test_llama3_forced_prefix_and_streaming():
    assert LLAMA.forced_prefix() == '{"name":'
    named = LLAMA.forced_prefix("get_weather")
    out = LLAMA.parse(named + ' {"city": "Paris"}}')
    assert calls(out) == [("get_weather", {"city": "Paris"})]
    assert calls(LLAMA.parse(LLAMA.forced_prefix() + ' "f", "parameters": {}}')) == [("f", {})]
    assert LLAMA.holdback("Sure.\n{") == len("Sure.\n")
    assert LLAMA.holdback("Sure.\n{\"na") == len("Sure.\n")
    assert LLAMA.holdback("Sure.\n{1, 2}") == len("Sure.\n{1, 2}")
    assert LLAMA.holdback("Sure <|pyth") == len("Sure ")
    for text in ['Let me look.\n{"name": "s", "parameters": {"q": 1}}',
                 'Set {1} and\n  {2}\nok', '{"name": "s", "parameters": {}}; {"name": "t", '
                 '"parameters": {}}', "a <|python_tag|>{\"name\": \"s\", \"parameters\": {}}"]:
        assert_streams_cleanly(LLAMA, text)


# -- mistral -------------------------------------------------------------------------------

def test_mistral_v3_json_list():
    # Mistral-7B-Instruct-v0.3 / Mixtral-8x22B: "[TOOL_CALLS] [ ... ]" (a space after the token)
    p = MistralToolParser()
    out = p.parse('[TOOL_CALLS] [{"name": "get_current_weather", "arguments": '
                  '{"location": "Paris, France", "format": "celsius"}}]')
    assert out.error is None and out.content is None
    assert calls(out) == [("get_current_weather",
                           {"location": "Paris, France", "format": "celsius"})]
    cid = out.tool_calls[0].id
    assert len(cid) == 9 and cid.isalnum()  # Mistral's templates reject other ids


def test_mistral_v7_list_of_several_calls_and_given_ids():
    # Nemo / Small 3: no space; the template writes ids back into the list
    out = MistralToolParser().parse(
        '[TOOL_CALLS][{"name": "add", "arguments": {"a": 1, "b": 2}, "id": "Ab3dE6gH9"}, '
        '{"name": "mul", "arguments": {"a": 3, "b": 4}}]')
    assert calls(out) == [("add", {"a": 1, "b": 2}), ("mul", {"a": 3, "b": 4})]
    assert out.tool_calls[0].id == "Ab3dE6gH9" and len(out.tool_calls[1].id) == 9


def test_mistral_v11_name_args_format():
    # Mistral-Small-3.2 / Devstral (tokenizer v11+): one [TOOL_CALLS] per call, [ARGS] before
    # the arguments, which are kept as the exact text the model wrote
    p = MistralToolParser()
    out = p.parse('[TOOL_CALLS]add_this_and_that[ARGS]{"a": 3.5, "b": 4}')
    assert out.error is None and calls(out) == [("add_this_and_that", {"a": 3.5, "b": 4})]
    assert out.tool_calls[0].arguments == '{"a": 3.5, "b": 4}'
    out = p.parse('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}'
                  '[TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}')
    assert calls(out) == [("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})]
    out = p.parse('[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Oslo"}')
    assert out.tool_calls[0].id == "a1b2c3d4e" and args(out.tool_calls[0]) == {"city": "Oslo"}
    # [ARGS] dropped by a decoder that skips special tokens: still readable
    assert calls(p.parse('[TOOL_CALLS]get_weather{"city": "Paris"}')) == [
        ("get_weather", {"city": "Paris"})]


def test_mistral_content_before_the_call():
    p = MistralToolParser()
    out = p.parse('I will check the weather.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}')
    assert out.content == "I will check the weather." and len(out.tool_calls) == 1
    out = p.parse('Checking.\n[TOOL_CALLS] [{"name": "f", "arguments": {}}]')
    assert out.content == "Checking." and calls(out) == [("f", {})]
    assert p.parse("No tools needed: 4.").content == "No tools needed: 4."


def test_mistral_malformed():
    p = MistralToolParser()
    for bad in ['[TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}}',  # list not closed
                '[TOOL_CALLS] [{"arguments": {"a": 1}}]',
                "[TOOL_CALLS] []",
                '[TOOL_CALLS] [{"name": "f", "arguments": [1]}]',
                '[TOOL_CALLS]get_weather[ARGS]{"city": ',
                '[TOOL_CALLS]get_weather[ARGS]"Paris"',
                '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"} thanks',
                "[TOOL_CALLS]",
                "[TOOL_CALLS] sorry, no"]:
        assert_malformed(p, bad)


def test_mistral_forced_prefix_by_tokenizer_style():
    old, new = MistralToolParser(), MistralToolParser()
    old.bind(CharTokenizer(MISTRAL_V3_SPECIALS))
    new.bind(CharTokenizer(MISTRAL_V11_SPECIALS))
    assert (old.style, new.style) == ("json", "args")
    for p in (old, new):
        assert p.forced_prefix() == "[TOOL_CALLS]"
        out = p.parse(p.forced_prefix() + 'get_weather[ARGS]{"city": "Paris"}')
        assert calls(out) == [("get_weather", {"city": "Paris"})]
    assert new.forced_prefix("get_weather") == "[TOOL_CALLS]get_weather[ARGS]"
    assert calls(new.parse(new.forced_prefix("f") + '{"x": 1}')) == [("f", {"x": 1})]
    assert calls(old.parse(old.forced_prefix("f") + ' {"x": 1}}]')) == [("f", {"x": 1})]
    assert_streams_cleanly(new, 'Sure.\n[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}')
    assert new.holdback("Sure [TOOL_") == len("Sure ")


# -- qwen3_coder ---------------------------------------------------------------------------

QC = Qwen3CoderToolParser()
WEATHER_XML = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Francisco\n"
               "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")


def test_qwen3_coder_single_call_with_typed_values():
    out = QC.parse(WEATHER_XML)
    assert out.error is None and out.content is None
    assert calls(out) == [("get_weather", {"city": "San Francisco", "days": 3})]


def test_qwen3_coder_multiline_code_json_values_and_several_calls():
    text = ("I'll write the file and list the folder.\n<tool_call>\n<function=write_file>\n"
            "<parameter=path>\nsrc/app.py\n</parameter>\n<parameter=content>\n"
            "def main():\n    print(\"hi\")\n\n</parameter>\n<parameter=options>\n"
            '{"mode": "w", "sync": true}\n</parameter>\n</function>\n</tool_call>\n'
            "<tool_call>\n<function=list_dir>\n<parameter=recursive>\nfalse\n</parameter>\n"
            "</function>\n</tool_call>")
    out = QC.parse(text)
    assert out.error is None and out.content == "I'll write the file and list the folder."
    assert calls(out) == [
        ("write_file", {"path": "src/app.py", "content": 'def main():\n    print("hi")\n',
                        "options": {"mode": "w", "sync": True}}),
        ("list_dir", {"recursive": False})]


def test_qwen3_coder_no_parameters_and_missing_closing_tag():
    assert calls(QC.parse("<tool_call>\n<function=now>\n</function>\n</tool_call>")) == [
        ("now", {})]
    out = QC.parse("<tool_call>\n<function=f>\n<parameter=x>\nNaN\n</parameter>\n"
                   "<parameter=y>\n\"quoted\"\n</parameter>\n</function>\n</tool_call>")
    assert calls(out) == [("f", {"x": "NaN", "y": "quoted"})]
    # the model stopped right after </function>: the call is whole
    out = QC.parse("<tool_call>\n<function=now>\n</function>\n")
    assert out.error is None and calls(out) == [("now", {})]


def test_qwen3_coder_malformed():
    for bad in ["<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n",
                "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n"
                "</tool_call>",
                "<tool_call>\n<function=f>\nstray words\n</function>\n</tool_call>",
                '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>']:
        assert_malformed(QC, bad)


def test_qwen3_coder_forced_prefix_and_hermes_on_coder_output():
    assert calls(QC.parse(QC.forced_prefix("get_weather") + "<parameter=city>\nParis\n"
                          "</parameter>\n</function>\n</tool_call>")) == [
        ("get_weather", {"city": "Paris"})]
    assert calls(QC.parse(QC.forced_prefix() + "now>\n</function>\n</tool_call>")) == [
        ("now", {})]
    assert_streams_cleanly(QC, "Let me check.\n" + WEATHER_XML)
    # the hermes parser (qwen3_moe's default) reports Qwen3-Coder's XML as malformed, not
    # as silent text: the job config's tool_call_parser: qwen3_coder is the fix
    assert_malformed(HermesToolParser(), WEATHER_XML)


def test_hermes_arguments_or_parameters_and_streaming():
    h = get_parser("hermes")
    out = h.parse('<tool_call>\n{"name": "f", "parameters": {"a": 1}}\n</tool_call>')
    assert calls(out) == [("f", {"a": 1})]
    assert_streams_cleanly(h, 'Hi.\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>')


# -- choosing a parser ---------------------------------------------------------------------

@pytest.mark.parametrize(("model_type", "cls"), [
    ("qwen2", HermesToolParser), ("qwen2_moe", HermesToolParser), ("qwen3", HermesToolParser),
    ("qwen3_moe", HermesToolParser), ("llama", Llama3JsonToolParser),
    ("mistral", MistralToolParser), ("mixtral", MistralToolParser),
    ("ministral", MistralToolParser)])
def test_family_table(model_type, cls):
    assert type(parser_for_model_type(model_type)) is cls


def test_architecture_names_and_override():
    assert parser_name_for_model("my_finetune", ["LlamaForCausalLM"]) == "llama3_json"
    assert parser_name_for_model(None, ["Qwen2ForCausalLM"]) == "hermes"
    assert type(parser_for_model_type("qwen3_moe", override="qwen3_coder")) is Qwen3CoderToolParser
    assert type(parser_for_model_type("gemma3", override="hermes")) is HermesToolParser
    assert {get_parser(n).name for n in BUILTIN_PARSERS} == set(BUILTIN_PARSERS)


def test_unknown_family_is_an_error_that_says_how_to_choose():
    with pytest.raises(ConfigError) as info:
        parser_for_model_type("gemma3", ["Gemma3ForCausalLM"])
    err = info.value
    assert "'gemma3'" in err.message and "Gemma3ForCausalLM" in err.message
    assert "llama → llama3_json" in err.message and "qwen2 → hermes" in err.message
    assert "tool_call_parser" in err.hint and "--tool-parser" in err.hint
    assert "qwen3_coder" in err.hint
    with pytest.raises(ConfigError, match="does not say its model_type"):
        parser_for_model_type(None)


def test_unknown_parser_name():
    with pytest.raises(UnknownParserError) as info:
        get_parser("llama3")
    assert isinstance(info.value, ConfigError) and isinstance(info.value, KeyError)
    assert "llama3_json, mistral, qwen3_coder" in str(info.value)
    with pytest.raises(KeyError):
        parser_for_model_type("qwen2", override="nope")


# -- the job config's model.tool_call_parser -----------------------------------------------

def test_config_key_matches_the_gateway_parsers():
    assert set(typing.get_args(ToolCallParserName)) == set(BUILTIN_PARSERS)


def test_config_key_validates():
    job = load_job_config_text("model:\n  name: Qwen3-Coder-30B-A3B-Instruct\n"
                               "  tool_call_parser: qwen3_coder\n")
    assert job.model.tool_call_parser == "qwen3_coder"
    assert load_job_config_text(job.to_yaml_text()) == job
    assert load_job_config_text("model: small\n").model.tool_call_parser is None
    assert "tool_call_parser" not in JobConfig(model={"name": "m"}).to_dict()["model"]
    with pytest.raises(ConfigError) as info:
        load_job_config_text("model:\n  name: m\n  tool_call_parser: llama3\n",
                             source="job.yaml")
    err = info.value
    assert err.where == "job.yaml:3" and "model.tool_call_parser" in err.message
    assert ("'hermes', 'llama3_json', 'mistral', 'qwen3_coder', 'gpt_oss', 'glm45', "
            "'deepseek_v3' or 'kimi_k2'") in err.message
    assert err.hint == "did you mean 'llama3_json'?"


# -- rltune serve --tool-parser ------------------------------------------------------------

def test_serve_resolves_the_parser_before_loading(tmp_path):
    from typer.testing import CliRunner

    from rltune.cli.main import _register_groups, app
    from rltune.gateway.toolcalls import parser_name_for_model_dir

    (tmp_path / "config.json").write_text(json.dumps(
        {"model_type": "gemma3", "architectures": ["Gemma3ForCausalLM"]}))
    assert parser_name_for_model_dir(tmp_path, "hermes") == "hermes"
    with pytest.raises(ConfigError, match="gemma3"):
        parser_name_for_model_dir(tmp_path, None)
    with pytest.raises(ConfigError, match="unknown tool-call parser"):
        parser_name_for_model_dir(tmp_path, "nope")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert parser_name_for_model_dir(tmp_path, None) == "llama3_json"

    _register_groups()
    result = CliRunner().invoke(app, ["serve", str(tmp_path), "--tool-parser", "nope"])
    assert result.exit_code == 2
    assert "unknown tool-call parser 'nope'" in result.output


# -- through the gateway's chat service, with a scripted engine ----------------------------

MISTRAL_V3_SPECIALS = ("<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]")
MISTRAL_V11_SPECIALS = (*MISTRAL_V3_SPECIALS, "[ARGS]", "[CALL_ID]")


class CharTokenizer:
    """One token per character; the given special tokens are single tokens (ids 0..k)."""

    def __init__(self, specials: tuple[str, ...]):
        self.specials = list(specials)
        self.eos_token_id = self.specials.index("</s>")

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids, i = [], 0
        while i < len(text):
            hit = next((s for s in self.specials if text.startswith(s, i)), None)
            if hit:
                ids.append(self.specials.index(hit))
                i += len(hit)
            else:
                ids.append(1000 + ord(text[i]))
                i += 1
        return ids

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        out = []
        for t in ids:
            if t < 1000:
                if not skip_special_tokens:
                    out.append(self.specials[t])
            else:
                out.append(chr(t - 1000))
        return "".join(out)

    def apply_chat_template(self, messages, tools=None, tokenize=False,
                            add_generation_prompt=True) -> str:
        return "<s>" + "".join(f"[INST]{m.get('content')}[/INST]" for m in messages)


class ScriptedEngine:
    """Answers every request with ``script`` (then </s>), one token per stream delta."""

    model_name = "scripted"
    max_context = 4096
    weight_version = 0

    def __init__(self, tokenizer: CharTokenizer, model_type: str, script: str = ""):
        self.tokenizer = tokenizer
        self.model = SimpleNamespace(config=SimpleNamespace(model_type=model_type,
                                                            architectures=None))
        self.script = script

    def _completion(self) -> Completion:
        ids = [*self.tokenizer.encode(self.script), self.tokenizer.eos_token_id]
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


def chat_request(**kw) -> ChatCompletionRequest:
    return ChatCompletionRequest(messages=[{"role": "user", "content": "Weather in Paris?"}],
                                 tools=[WEATHER_TOOL], **kw)


def test_gateway_picks_the_family_parser_or_refuses():
    from rltune.gateway.server import Gateway

    tok = CharTokenizer(MISTRAL_V11_SPECIALS)
    gw = Gateway(ScriptedEngine(tok, "mistral"))
    assert isinstance(gw.chat.parser, MistralToolParser) and gw.chat.parser.style == "args"
    assert isinstance(Gateway(ScriptedEngine(tok, "llama")).chat.parser, Llama3JsonToolParser)
    with pytest.raises(ConfigError, match="'gemma3'"):
        Gateway(ScriptedEngine(tok, "gemma3"))
    gw = Gateway(ScriptedEngine(tok, "gemma3"), tool_parser="hermes")
    assert isinstance(gw.chat.parser, HermesToolParser)


async def test_mistral_markers_survive_decoding_in_responses_and_streams():
    tok = CharTokenizer(MISTRAL_V11_SPECIALS)
    engine = ScriptedEngine(tok, "mistral", 'Checking.[TOOL_CALLS]get_weather[ARGS]'
                                            '{"city": "Paris"}')
    svc = ChatService(engine, MistralToolParser())
    assert svc.decode(tok.encode("a[TOOL_CALLS]b</s>")) == "a[TOOL_CALLS]b"
    p = svc.prepare(chat_request())
    result = await engine.generate_one(svc.engine_request(p))
    resp, _ = svc.response(p, result.completions)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Checking."
    (tc,) = choice.message.tool_calls
    assert tc["function"]["name"] == "get_weather"
    assert json.loads(tc["function"]["arguments"]) == {"city": "Paris"}
    assert len(tc["id"]) == 9

    chunks = [c async for c in svc.stream_chunks(p, lambda *a: None)]
    streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert streamed == "Checking."
    final = chunks[-1]["choices"][0]
    assert final["finish_reason"] == "tool_calls"
    assert final["delta"]["tool_calls"][0]["function"]["name"] == "get_weather"


async def test_named_tool_choice_forces_the_family_prefix():
    tok = CharTokenizer(MISTRAL_V11_SPECIALS)
    engine = ScriptedEngine(tok, "mistral", '{"city": "Paris"}')
    svc = ChatService(engine, MistralToolParser())
    p = svc.prepare(chat_request(tool_choice={"type": "function",
                                              "function": {"name": "get_weather"}}))
    assert p.prefix == "[TOOL_CALLS]get_weather[ARGS]"
    assert p.prompt_ids[-len("get_weather") - 2] == tok.specials.index("[TOOL_CALLS]")
    result = await engine.generate_one(svc.engine_request(p))
    resp, _ = svc.response(p, result.completions)
    assert resp.choices[0].message.tool_calls[0]["function"]["arguments"] == '{"city": "Paris"}'


def test_hermes_decoding_is_unchanged():
    tok = CharTokenizer(MISTRAL_V11_SPECIALS)
    svc = ChatService(ScriptedEngine(tok, "qwen2"), HermesToolParser())
    ids = tok.encode("a[TOOL_CALLS]b</s>")
    assert svc.marker_ids == {} and svc.decode(ids) == tok.decode(ids, skip_special_tokens=True)


@pytest.mark.parametrize(("template", "expected"), [
    # Llama 3.1 / Qwen2.5 / Mistral / Qwen3-Coder templates serialise a mapping themselves
    ("{{- '\"parameters\": ' + tool_call.arguments | tojson }}", {"city": "Paris"}),
    # rltune's and Qwen3's templates write string arguments verbatim
    ("{%- if tool_call.arguments is string %}{{ tool_call.arguments }}{% endif %}",
     '{"city": "Paris"}'),
    (None, '{"city": "Paris"}')])
def test_sent_back_arguments_follow_what_the_template_takes(template, expected):
    tok = CharTokenizer(MISTRAL_V11_SPECIALS)
    tok.chat_template = template
    svc = ChatService(ScriptedEngine(tok, "llama"), Llama3JsonToolParser())
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
    req = ChatCompletionRequest(tools=[WEATHER_TOOL], messages=[
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}])
    sent = svc.prepare(req).messages[1]["tool_calls"][0]["function"]["arguments"]
    assert sent == expected
