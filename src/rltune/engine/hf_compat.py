"""The one place that knows what transformers calls the KV cache.

transformers 5.x renamed the cache keyword of a causal LM's ``forward`` (and the field of its
output) from ``past_key_values`` to ``cache`` (5.17 still says ``past_key_values``, 5.24 says
``cache``). A model given the other name does not fail: ``**kwargs`` swallows it and the model
silently runs without the cache, so every decode step forgets the context. Pass the cache with
:func:`cache_kwargs` and read it back with :func:`output_cache`; the engine also checks at start
that a cached decode step matches a full forward (``TransformersEngine``).

Example:
    >>> out = model(input_ids=ids, use_cache=True, **cache_kwargs(model, cache))  # doctest: +SKIP
    >>> cache = output_cache(out)                                                 # doctest: +SKIP
"""

from __future__ import annotations

import functools
import inspect
import weakref
from typing import Any, Optional

CACHE_KEYWORDS = ("cache", "past_key_values")  # newest first

_by_model: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _named_keyword(fn: Any) -> Optional[str]:
    """The cache keyword that ``fn``'s signature names explicitly (not via ``**kwargs``)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    for name in CACHE_KEYWORDS:
        p = params.get(name)
        if p is not None and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            return name
    return None


def _inner_models(model: Any) -> list[Any]:
    """``model``, then what it wraps: a PEFT model's base, a causal LM's decoder."""
    found: list[Any] = []
    todo = [model]
    while todo and len(found) < 8:
        m = todo.pop(0)
        if m is None or any(m is f for f in found):
            continue
        found.append(m)
        get_base = getattr(m, "get_base_model", None)
        if callable(get_base):
            try:
                todo.append(get_base())
            except Exception:  # a wrapper without a base model yet
                pass
        for attr in ("base_model", "model"):
            try:
                todo.append(getattr(m, attr, None))
            except Exception:
                pass
    return found


@functools.lru_cache(maxsize=1)
def installed_keyword() -> str:
    """The cache keyword of the installed transformers (from its causal-LM output class)."""
    from transformers.modeling_outputs import CausalLMOutputWithPast

    fields = getattr(CausalLMOutputWithPast, "__dataclass_fields__", {})
    return next((k for k in CACHE_KEYWORDS if k in fields), "past_key_values")


def cache_keyword(model: Any) -> str:
    """``"cache"`` or ``"past_key_values"``: the keyword ``model``'s forward takes its cache by.

    Looks at the model's own ``forward`` first, then at the models it wraps (PEFT base model,
    the decoder inside a ``*ForCausalLM``); falls back to the installed transformers' name.
    Remembered per model object.
    """
    try:
        return _by_model[model]
    except (KeyError, TypeError):
        pass
    keyword = None
    for m in _inner_models(model):
        keyword = _named_keyword(getattr(m, "forward", None))
        if keyword:
            break
    keyword = keyword or installed_keyword()
    try:
        _by_model[model] = keyword
    except TypeError:  # not weak-referenceable: just do not remember
        pass
    return keyword


def cache_kwargs(model: Any, cache: Any) -> dict[str, Any]:
    """The keyword argument that passes ``cache`` to ``model``'s forward, e.g. ``{"cache": c}``."""
    return {cache_keyword(model): cache}


def output_cache(output: Any) -> Any:
    """The KV cache a forward returned (``output.cache`` or, before 5.x's rename,
    ``output.past_key_values``); ``None`` if it returned none."""
    for name in CACHE_KEYWORDS:
        value = getattr(output, name, None)
        if value is not None:
            return value
    return None
