"""A stand-in for a Hugging Face chat model, built from rltune's tiny-model kit.

``build_standin(dir)`` saves an untrained tiny Qwen2 with a Qwen-style tokenizer: ChatML
specials, ``<tool_call>`` / ``<think>`` as added tokens, and a chat template written here in
the shape of Qwen2.5's (tools in the system turn, ``<tool_call>`` JSON with ``tojson``
arguments, ``<tool_response>`` in user turns) plus Qwen3's thinking switch
(``enable_thinking: false`` closes an empty ``<think>`` block after the generation prompt,
``reasoning_content`` of assistant turns is rendered back). It has no ``rltune_model.json``:
for rltune it is a foreign model.

``fill_hf_cache(hf_home, repo_id, src)`` lays ``src`` out as huggingface_hub's cache does
(``hub/models--org--name/{blobs,snapshots/<rev>,refs/main}``), as ``hf download`` leaves it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

THINK_TOKENS = ("<think>", "</think>")
DEFAULT_SYSTEM = "You are a helpful assistant."
TOOLS_INTRO = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n"
               "<tools>")
TOOLS_OUTRO = ("\n</tools>\n\nFor each function call, return a json object with function name "
               "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
               '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')

QWEN_STYLE_TEMPLATE = (
    "{%- set thinking = enable_thinking is not defined or enable_thinking -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if messages[0].role == 'system' -%}{{- messages[0].content + '\\n\\n' -}}"
    "{%- else -%}{{- " + repr(DEFAULT_SYSTEM + "\n\n") + " -}}{%- endif -%}"
    "{{- " + repr(TOOLS_INTRO) + " -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- " + repr(TOOLS_OUTRO) + " + '<|im_end|>\\n' -}}"
    "{%- elif messages[0].role == 'system' -%}"
    "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'system' and loop.first -%}"
    "{%- elif m.role == 'user' or m.role == 'system' -%}"
    "{{- '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' -}}"
    "{%- elif m.role == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if m.reasoning_content is defined and m.reasoning_content is string"
    " and m.reasoning_content -%}"
    "{{- '<think>\\n' + m.reasoning_content.strip('\\n') + '\\n</think>\\n\\n' -}}"
    "{%- endif -%}"
    "{{- m.content or '' -}}"
    "{%- for call in (m.tool_calls or []) -%}"
    "{%- set fn = call.function if call.function is defined else call -%}"
    "{%- if m.content or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>\\n{\"name\": \"' + fn.name + '\", \"arguments\": ' -}}"
    "{{- fn.arguments | tojson -}}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif m.role == 'tool' -%}"
    "{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}"
    "{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + m.content + '\\n</tool_response>' -}}"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' -%}"
    "{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if not thinking -%}{{- '<think>\\n\\n</think>\\n\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)


def build_standin(path: Path) -> Path:
    """Save the stand-in model into ``path`` (about 2 s); returns ``path``."""
    from tokenizers import AddedToken

    from rltune.models import build_tiny_model

    model, tok = build_tiny_model(seed=0)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in THINK_TOKENS])
    model.resize_token_embeddings(len(tok))
    model.config.vocab_size = len(tok)
    tok.chat_template = QWEN_STYLE_TEMPLATE
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path))
    tok.save_pretrained(str(path))
    return path


def fill_hf_cache(hf_home: Path, repo_id: str, src: Path, revision: str = "0" * 40) -> Path:
    """Put ``src``'s files into ``hf_home/hub`` as snapshot ``revision`` of ``repo_id`` (blobs
    named by content hash, snapshot entries linking to them, ``refs/main``); the snapshot."""
    repo = hf_home / "hub" / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    for f in sorted(p for p in src.iterdir() if p.is_file()):
        digest = hashlib.sha256(f.read_bytes()).hexdigest()
        blob = repo / "blobs" / digest
        if not blob.exists():
            shutil.copyfile(f, blob)
        os.symlink(os.path.relpath(blob, snapshot), snapshot / f.name)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot
