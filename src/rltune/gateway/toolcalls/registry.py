"""Tool-call parsers by name, and the parser of each model family.

Example:
    >>> get_parser("hermes").name, parser_name_for_model("llama")
    ('hermes', 'llama3_json')
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Optional, Union

from rltune.gateway.toolcalls.base import ToolParser
from rltune.gateway.toolcalls.deepseek_v3 import DeepSeekV3ToolParser
from rltune.gateway.toolcalls.glm45 import Glm45ToolParser
from rltune.gateway.toolcalls.gpt_oss import GptOssToolParser
from rltune.gateway.toolcalls.hermes import HermesToolParser
from rltune.gateway.toolcalls.kimi_k2 import KimiK2ToolParser
from rltune.gateway.toolcalls.llama3_json import Llama3JsonToolParser
from rltune.gateway.toolcalls.mistral import MistralToolParser
from rltune.gateway.toolcalls.qwen3_coder import Qwen3CoderToolParser
from rltune.names import TOOL_PARSERS, check_registry
from rltune.sdk.errors import ConfigError


class UnknownParserError(ConfigError, KeyError):
    """No parser by that name (also a ``KeyError``, as ``get_parser`` raised before)."""


_PARSERS: dict[str, Callable[[], ToolParser]] = {
    "hermes": HermesToolParser,
    "llama3_json": Llama3JsonToolParser,
    "mistral": MistralToolParser,
    "qwen3_coder": Qwen3CoderToolParser,
    "gpt_oss": GptOssToolParser,
    "glm45": Glm45ToolParser,
    "deepseek_v3": DeepSeekV3ToolParser,
    "kimi_k2": KimiK2ToolParser,
}
#: The parsers rltune ships (the job config's ``model.tool_call_parser`` accepts these).
BUILTIN_PARSERS: tuple[str, ...] = tuple(_PARSERS)
check_registry("tool-call parser", TOOL_PARSERS, _PARSERS)

# HF config.model_type → parser name. Qwen3-Coder (qwen3_moe) writes XML calls: choose
# qwen3_coder explicitly for it; the other Qwen3 models use hermes. Qwen3.5 writes
# Qwen3-Coder's XML. Kimi-K2 says kimi_k2 (its architecture is DeepSeek-V3's).
_FAMILIES: dict[str, str] = {
    "qwen2": "hermes", "qwen2_moe": "hermes", "qwen3": "hermes", "qwen3_moe": "hermes",
    "qwen3_5": "qwen3_coder", "qwen3_5_moe": "qwen3_coder",
    "llama": "llama3_json",
    "mistral": "mistral", "mixtral": "mistral", "ministral": "mistral", "mistral3": "mistral",
    "gpt_oss": "gpt_oss", "glm4_moe": "glm45", "deepseek_v3": "deepseek_v3",
    "kimi_k2": "kimi_k2",
}
# HF config.architectures → parser name, for a model_type the table above does not know.
_ARCHITECTURES: dict[str, str] = {
    "Qwen2ForCausalLM": "hermes", "Qwen2MoeForCausalLM": "hermes",
    "Qwen3ForCausalLM": "hermes", "Qwen3MoeForCausalLM": "hermes",
    "LlamaForCausalLM": "llama3_json",
    "MistralForCausalLM": "mistral", "MixtralForCausalLM": "mistral",
    "MinistralForCausalLM": "mistral", "Mistral3ForConditionalGeneration": "mistral",
    "Qwen3_5ForConditionalGeneration": "qwen3_coder",
    "Qwen3_5MoeForConditionalGeneration": "qwen3_coder",
    "GptOssForCausalLM": "gpt_oss", "Glm4MoeForCausalLM": "glm45",
    "DeepseekV3ForCausalLM": "deepseek_v3",
}

#: How to choose a parser explicitly (said by every selection error).
HOW_TO_CHOOSE = ("choose a parser explicitly: model.tool_call_parser in the job config, "
                 "`rltune serve --tool-parser NAME`, or Gateway(tool_parser=NAME)")


def register_parser(name: str, factory: Callable[[], ToolParser], *,
                    model_types: tuple[str, ...] = ()) -> None:
    """Add a parser, optionally as the default for some ``config.model_type`` values."""
    _PARSERS[name] = factory
    for mt in model_types:
        _FAMILIES[mt] = name


def get_parser(name: str) -> ToolParser:
    """A parser by name (``hermes``, ``llama3_json``, ``mistral``, ``qwen3_coder``,
    ``gpt_oss``, ``glm45``, ``deepseek_v3``, ``kimi_k2``); raises
    :class:`UnknownParserError` (a ``ConfigError`` and a ``KeyError``) naming the known ones."""
    try:
        factory = _PARSERS[name]
    except (KeyError, TypeError):
        raise UnknownParserError(
            f"unknown tool-call parser {name!r}; known: {', '.join(sorted(_PARSERS))}",
            where="tool_call_parser", hint="use one of: " + ", ".join(sorted(_PARSERS))
        ) from None
    return factory()


def parser_name_for_model(model_type: Optional[str],
                          architectures: Optional[Sequence[str]] = ()) -> str:
    """The parser name for a model family; ``ConfigError`` for a family rltune does not know."""
    if model_type in _FAMILIES:
        return _FAMILIES[model_type]  # type: ignore[index]
    for arch in architectures or ():
        if arch in _ARCHITECTURES:
            return _ARCHITECTURES[arch]
    families = ", ".join(f"{mt} → {p}" for mt, p in sorted(_FAMILIES.items()))
    what = (f"model type {model_type!r}" if model_type else
            "a model that does not say its model_type")
    if architectures:
        what += f" (architectures {', '.join(architectures)})"
    raise ConfigError(
        f"no tool-call parser is known for {what}; known model families: {families}",
        where="tool_call_parser",
        hint=f"{HOW_TO_CHOOSE}; parsers: {', '.join(sorted(_PARSERS))}")


def parser_name_for_model_dir(path: Union[str, Path], override: Optional[str] = None) -> str:
    """The parser name for the saved model at ``path``: ``override`` if given (checked), else
    its family's from ``config.json``. Cheap: call it before loading the weights."""
    if override:
        get_parser(override)
        return override
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = {}
    return parser_name_for_model(config.get("model_type"), config.get("architectures") or ())


def parser_for_model_type(model_type: Optional[str],
                          architectures: Optional[Sequence[str]] = (), *,
                          override: Optional[str] = None) -> ToolParser:
    """The parser named ``override``, else the one for the model's family (see
    :func:`parser_name_for_model`; an unknown family is a ``ConfigError``, not a fallback)."""
    if override:
        return get_parser(override)
    return get_parser(parser_name_for_model(model_type, architectures))
