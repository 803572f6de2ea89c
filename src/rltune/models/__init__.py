"""rltune.models: the tiny-model kit (tokenizer, chat template, Qwen2 models, warm start).

Importing this package is cheap: torch and transformers load only when a function needs them.
Public API (see each module for details):

* :mod:`rltune.models.tasks` — calculator questions, ``CALCULATOR_TOOL``, ``calculate``,
  ``extract_answer``, ``make_dataset_rows``, ``write_jsonl`` (pure Python).
* ``train_tokenizer``, ``load_tokenizer``, ``CHAT_TEMPLATE``, ``render_chat``.
* ``build_model``, ``build_tiny_model``, ``save_model``, ``SHAPES``.
* ``ensure_demo_model``, ``models_home``, ``list_models`` (warm-started ``nano`` / ``small``;
  an interrupted build resumes: :mod:`rltune.models.partial`).
* ``run_episodes`` — the calculator agent loop over ``model.generate``.
"""

from __future__ import annotations

from rltune._lazy import lazy_getattr

_EXPORTS = {
    "CHAT_TEMPLATE": "rltune.models.chat_template",
    "render_chat": "rltune.models.chat_template",
    "train_tokenizer": "rltune.models.tokenizer",
    "load_tokenizer": "rltune.models.tokenizer",
    "SHAPES": "rltune.models.factory",
    "build_model": "rltune.models.factory",
    "build_tiny_model": "rltune.models.factory",
    "save_model": "rltune.models.factory",
    "read_meta": "rltune.models.factory",
    "ensure_demo_model": "rltune.models.registry",
    "models_home": "rltune.models.registry",
    "list_models": "rltune.models.registry",
    "resolve_model": "rltune.models.registry",
    "run_episodes": "rltune.models.agent",
    "Episode": "rltune.models.agent",
}

__all__ = sorted(_EXPORTS)
__getattr__ = lazy_getattr(__name__, _EXPORTS)
