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

from rltune._lazy import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, {
    ".chat_template": ("CHAT_TEMPLATE", "render_chat"),
    ".tokenizer": ("train_tokenizer", "load_tokenizer"),
    ".factory": ("SHAPES", "build_model", "build_tiny_model", "save_model", "read_meta"),
    ".registry": ("ensure_demo_model", "models_home", "list_models", "resolve_model"),
    ".agent": ("run_episodes", "Episode"),
})
