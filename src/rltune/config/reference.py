"""The job config described from its pydantic models: a JSON Schema for ``job.yaml`` (editors
complete and check it) and the Markdown reference ``docs/config.md``.

Both are generated, never written by hand: ``rltune config schema`` prints the schema,
``rltune config reference`` the page (a test keeps ``docs/config.md`` equal to it).

Example:
    >>> schema = job_schema()
    >>> schema["additionalProperties"], "hyper_parameters" in schema["$defs"]["Training"][
    ...     "properties"]
    (False, True)
"""

from __future__ import annotations

import json
import typing
from enum import Enum
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from rltune.config.compat.synonyms import SYNONYMS

SCHEMA_ID = "https://rltune.dev/schema/job.json"


def job_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of rltune's ``job.yaml`` shape, unknown keys refused, the
    accepted input spellings included (``job_name``, ``mode``, ``model: <name>``, TRL's and
    verl's hyper-parameter names)."""
    from rltune.config.job import JobConfig

    schema = _numbers_as_text(JobConfig.model_json_schema(mode="validation"))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    for body in [schema, *schema.get("$defs", {}).values()]:
        if "properties" in body:
            body["additionalProperties"] = False
    props = schema["properties"]
    props["job_name"] = {"type": "string", "description": "the documented shape's name"}
    props["mode"] = {"enum": ["reinforcement", "pg_opd"],
                     "description": "the documented shape's training.type"}
    model = props.pop("model")
    props["model"] = {"anyOf": [{"type": "string", "description": "a model name, path or "
                                 "hub id"}, model]}
    hp = schema["$defs"]["HyperParameters"]["properties"]
    for syn in SYNONYMS:
        if syn.name in hp:
            continue
        if syn.refused:
            hp[syn.name] = {"not": {}, "description": f"{syn.tool}'s name, refused: use "
                            f"{syn.target} ({syn.why})"}
        elif syn.noop:
            hp[syn.name] = ({"enum": list(syn.harmless)} if syn.harmless else {}) | {
                "description": f"{syn.tool}'s name, a no-op in rltune ({syn.why})"}
        else:
            hp[syn.name] = {**{k: v for k, v in hp.get(syn.target, {}).items()
                               if k != "default"},
                            "description": f"{syn.tool}'s name for {syn.target}"
                            + (f" ({syn.why})" if syn.why else "")}
    return schema


#: A number written as text (PyYAML reads ``2e-6`` as a string; the config accepts it).
_NUMERIC_TEXT = {"type": "string", "pattern": r"^\s*[-+]?(\d[\d_]*\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$"}


def _numbers_as_text(node: Any) -> Any:
    """Every ``number``/``integer`` schema also accepts numeric text, as the config does."""
    if isinstance(node, list):
        return [_numbers_as_text(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _numbers_as_text(v) for k, v in node.items()}
    if node.get("type") in ("number", "integer"):
        bounds = {k: node.pop(k) for k in ("type", "minimum", "maximum", "exclusiveMinimum",
                                            "exclusiveMaximum") if k in node}
        node["anyOf"] = [bounds, _NUMERIC_TEXT]
    return node


def schema_text() -> str:
    return json.dumps(job_schema(), indent=2, sort_keys=False) + "\n"


# ---- the Markdown reference ----

def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if origin is typing.Literal:
        return " \\| ".join(f"`{a.value if isinstance(a, Enum) else a}`"
                             for a in typing.get_args(annotation))
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " or ".join(_type_name(a) for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (list, tuple):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "mapping"
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return " \\| ".join(f"`{m.value}`" for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def _models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for a in typing.get_args(annotation) for m in _models(a)]


def _default(field: Any) -> str:
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return ""
        if isinstance(value, BaseModel):
            return "(section defaults)"
        return f"`{json.dumps(value)}`"
    if field.default is PydanticUndefined:
        return "required"
    value = field.default.value if isinstance(field.default, Enum) else field.default
    return "" if value is None else f"`{json.dumps(value)}`"


def _comments(model: type) -> dict[str, str]:
    """``#:`` comments above the fields in the class's source (fields without a
    ``description``)."""
    import inspect
    import re

    try:
        lines = inspect.getsource(model).splitlines()
    except (OSError, TypeError):
        return {}
    found: dict[str, str] = {}
    pending: list[str] = []
    for line in lines:
        text = line.strip()
        if text.startswith("#:"):
            pending.append(text[2:].strip())
            continue
        m = re.match(r"(\w+)\s*:", text)
        if m and pending:
            found[m.group(1)] = " ".join(pending)
        pending = []
    return found


def _clean(text: str) -> str:
    return " ".join(text.split()).replace("|", "/")


def reference_markdown() -> str:
    """``docs/config.md``: every section of the job config, every key, type, default and
    description, from the pydantic models."""
    from rltune.config.job import JobConfig

    out = ["# Job config reference", "",
           "Generated from the pydantic models by `rltune config reference` (a test keeps this "
           "page equal to it); the JSON Schema for editors is `rltune config schema`. "
           "TRL's and verl's names for the hyper-parameters are in "
           "[coming-from.md](coming-from.md).", ""]
    seen: set[type] = set()
    queue: list[type[BaseModel]] = [JobConfig]
    while queue:
        model = queue.pop(0)
        if model in seen:
            continue
        seen.add(model)
        doc = _clean((model.__doc__ or "").strip().split("\n\n")[0])
        comments = _comments(model)
        out += [f"## {model.__name__}", ""] + ([doc, ""] if doc else [])
        out += ["| key | type | default | description |", "| --- | --- | --- | --- |"]
        for name, field in model.model_fields.items():
            if field.exclude:
                continue
            desc = _clean(field.description or comments.get(name, ""))
            out.append(f"| `{name}` | {_type_name(field.annotation)} | {_default(field)} "
                       f"| {desc} |")
            queue += [m for m in _models(field.annotation) if m not in seen]
        out.append("")
    return "\n".join(out)
