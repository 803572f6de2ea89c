"""Cloud model codes (Bailian's ``qwen3.5-9b``, Ark's ``doubao-seed-1-6``…) → hub ids.

A job written for a cloud says ``model: qwen3.5-9b``; rltune trains open weights, so the code is
read as the hub id in ``MODEL_CODES`` (``Qwen/Qwen3.5-9B``), downloaded or found in the
Hugging Face cache like any hub id. Codes of hosted-only models (``HOSTED_ONLY``: Doubao, the
Qwen *flash*/*plus*/*max* API models) are refused with the open model to use instead.

Overrides: a YAML or JSON mapping in ``$RLTUNE_MODEL_CODES`` (a file path), else in
``$RLTUNE_HOME/model-codes.yaml`` when that file exists; each entry is either
``code: org/name`` (a hub id, or a local path) or ``code: {hosted_only: "open alternative"}``.
The user's entries win over the built-in ones. Codes are matched case-insensitively.

Example:
    >>> lookup("qwen3.5-9b", overrides={})
    'Qwen/Qwen3.5-9B'
    >>> lookup("Qwen/Qwen3.5-9B", overrides={}) is None
    True
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

from rltune.sdk.errors import ConfigError, NotFoundError

#: Environment variable naming a user override file.
ENV_VAR = "RLTUNE_MODEL_CODES"
#: The override file looked for in the rltune home when the variable is unset.
HOME_FILE = "model-codes.yaml"


def _qwen(code: str, name: str) -> tuple[str, str]:
    return code, f"Qwen/{name}"


#: Cloud code → hub id (open weights). Bailian / Model Studio and Ark codes, lower case.
MODEL_CODES: dict[str, str] = dict([
    # Qwen3.5 (Bailian's fine-tunable codes first)
    _qwen("qwen3.5-9b", "Qwen3.5-9B"),
    _qwen("qwen3.5-35b-a3b", "Qwen3.5-35B-A3B"),
    _qwen("qwen3.5-397b-a17b", "Qwen3.5-397B-A17B"),
    _qwen("qwen3.5-27b", "Qwen3.5-27B"),
    _qwen("qwen3.5-122b-a10b", "Qwen3.5-122B-A10B"),
    _qwen("qwen3.5-4b", "Qwen3.5-4B"),
    _qwen("qwen3.5-2b", "Qwen3.5-2B"),
    _qwen("qwen3.5-0.8b", "Qwen3.5-0.8B"),
    # Qwen3
    *(_qwen(f"qwen3-{size}", f"Qwen3-{size.upper()}")
      for size in ("0.6b", "1.7b", "4b", "8b", "14b", "32b", "30b-a3b", "235b-a22b")),
    _qwen("qwen3-coder-30b-a3b-instruct", "Qwen3-Coder-30B-A3B-Instruct"),
    _qwen("qwen3-coder-480b-a35b-instruct", "Qwen3-Coder-480B-A35B-Instruct"),
    # Qwen2.5
    *(_qwen(f"qwen2.5-{size}-instruct", f"Qwen2.5-{size.upper()}-Instruct")
      for size in ("0.5b", "1.5b", "3b", "7b", "14b", "32b", "72b")),
    *(_qwen(f"qwen2.5-math-{size}-instruct", f"Qwen2.5-Math-{size.upper()}-Instruct")
      for size in ("1.5b", "7b", "72b")),
    *(_qwen(f"qwen2.5-coder-{size}-instruct", f"Qwen2.5-Coder-{size.upper()}-Instruct")
      for size in ("0.5b", "1.5b", "3b", "7b", "14b", "32b")),
])

#: Hosted-only model codes (exact, or a prefix ending in ``-``) → the open model to use.
HOSTED_ONLY: dict[str, str] = {
    "doubao-": "Qwen/Qwen3.5-9B (Bailian's qwen3.5-9b)",
    "qwen3.5-flash": "Qwen/Qwen3.5-35B-A3B",
    "qwen3.6-flash": "Qwen/Qwen3.5-35B-A3B",
    "qwen-flash": "Qwen/Qwen3.5-35B-A3B",
    "qwen-turbo": "Qwen/Qwen3.5-9B",
    "qwen-plus": "Qwen/Qwen3.5-35B-A3B",
    "qwen-max": "Qwen/Qwen3.5-397B-A17B",
    "qwen3-max": "Qwen/Qwen3.5-397B-A17B",
}


def user_overrides(home: Optional[str | Path] = None) -> dict[str, Any]:
    """The user's table (``$RLTUNE_MODEL_CODES``, else ``<home>/model-codes.yaml``), or {}."""
    path_text = os.environ.get(ENV_VAR, "").strip()
    if path_text:
        path = Path(path_text).expanduser()
        if not path.is_file():
            raise ConfigError(f"{ENV_VAR} names {path}, which is not a file", where=ENV_VAR,
                              hint="point it at a YAML mapping of model code → hub id")
    else:
        root = Path(home or os.environ.get("RLTUNE_HOME") or Path.home() / ".rltune")
        path = root.expanduser() / HOME_FILE
        if not path.is_file():
            return {}
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:
        raise ConfigError(f"cannot read the model code table {path}: {exc}", where=str(path),
                          hint="write a mapping: qwen3.5-9b: Qwen/Qwen3.5-9B") from None
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(
            isinstance(v, str) or (isinstance(v, dict) and set(v) == {"hosted_only"})
            for v in data.values()):
        raise ConfigError(f"the model code table {path} must map each code to a hub id or to "
                          "{hosted_only: <open alternative>}", where=str(path),
                          hint="qwen3.5-9b: Qwen/Qwen3.5-9B")
    return {str(k).lower(): v for k, v in data.items()}


def lookup(spec: str, *, overrides: Optional[dict[str, Any]] = None,
           home: Optional[str | Path] = None) -> Optional[str]:
    """The hub id (or path) of a cloud model code, None when ``spec`` is no code. A
    hosted-only code raises ``NotFoundError`` naming the open alternative."""
    code = str(spec).strip().lower()
    table = user_overrides(home) if overrides is None else overrides
    entry = table.get(code)
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict):
        _refuse(spec, entry["hosted_only"])
    if code in MODEL_CODES:
        return MODEL_CODES[code]
    for prefix, alternative in HOSTED_ONLY.items():
        if code == prefix or (code.startswith(prefix) and (
                prefix.endswith("-") or code[len(prefix)] == "-")):
            _refuse(spec, alternative)
    return None


def _refuse(spec: str, alternative: str) -> None:
    raise NotFoundError(
        f"model {spec!r} is a hosted-only cloud model: its weights are not published, so "
        "rltune cannot train it", where="model.name",
        hint=f"train the open model {alternative} instead, or map the code yourself in "
        f"${ENV_VAR} / ~/.rltune/{HOME_FILE}")
