"""The length rule: a job's ``max_length`` (prompt + response tokens) and ``max_prompt_length``
against the model's context (``max_position_embeddings`` in its ``config.json``).

One function, :func:`fit_lengths`, applied the same way by ``rltune train``, ``rltune plan``,
the job server at submit (so ``rltune run`` too) and the trainer itself:

* a length the job leaves unset is derived: ``max_length`` is 2048 or the model's context,
  whichever is smaller; ``max_prompt_length`` is 1024, or half of ``max_length`` when 1024
  would leave no room for a response;
* a ``max_length`` set without a prompt budget (also what TRL's ``max_completion_length`` and
  verl's ``data.max_response_length`` set: 1024 + the response length) keeps its response
  budget; beyond the context, the prompt budget takes what the context leaves, while the
  response budget is at most half the context;
* anything else beyond the context is refused, naming the key and the model's limit.

Example:
    >>> from rltune.config.hyperparams import HyperParameters
    >>> hp, notes = fit_lengths(HyperParameters(), 1024, model="nano")
    >>> hp.max_length, hp.max_prompt_length
    (1024, 512)
    >>> hp, _ = fit_lengths(HyperParameters(max_completion_length=256), 1024, model="nano")
    >>> hp.max_length, hp.max_prompt_length
    (1024, 768)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from rltune.sdk.errors import ConfigError

if TYPE_CHECKING:
    from rltune.config.hyperparams import HyperParameters

WHERE = "training.hyper_parameters"
#: The prompt budget when a job sets none (halved where it would leave no response room).
DEFAULT_PROMPT = 1024


def derived_prompt(max_length: int) -> int:
    """``max_prompt_length`` when a job leaves it unset."""
    return DEFAULT_PROMPT if max_length > DEFAULT_PROMPT else max(1, max_length // 2)


def model_context(model_dir: Optional[Path | str]) -> Optional[int]:
    """The model's context in tokens (``max_position_embeddings``, or its ``text_config``'s),
    None when the folder or its ``config.json`` does not say."""
    if model_dir is None:
        return None
    try:
        cfg = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(cfg, dict):
        return None
    value = cfg.get("max_position_embeddings") or (cfg.get("text_config") or {}).get(
        "max_position_embeddings")
    return int(value) if isinstance(value, int) and value > 0 else None


def fit_lengths(hp: HyperParameters, context: Optional[int], *, model: str
                ) -> tuple[HyperParameters, list[str]]:
    """``hp`` with its lengths fitted to ``context`` (unchanged when it fits or the context is
    unknown), and a note per derived value; a ``ConfigError`` for a set value that cannot fit."""
    if context is None or hp.max_length <= context:
        return hp, []
    given = hp.model_fields_set
    limit = f"the model's context of {context} tokens (max_position_embeddings of {model})"
    if "max_length" not in given:
        total = context
        prompt = hp.max_prompt_length if "max_prompt_length" in given else \
            derived_prompt(total)
        if prompt >= total:
            raise ConfigError(
                f"max_prompt_length {prompt} leaves no room for a response in {limit}",
                where=f"{WHERE}.max_prompt_length",
                hint=f"set max_prompt_length below {context} (max_length is then {context})")
        why = (f"max_length {total} (unset: 2048 is beyond {limit}), max_prompt_length "
               f"{prompt}" + ("" if "max_prompt_length" in given else " (unset)"))
    elif "max_prompt_length" not in given and hp.max_length - hp.max_prompt_length <= \
            context // 2:
        response = hp.max_length - hp.max_prompt_length
        total, prompt = context, context - response
        why = (f"max_length {total} ({hp.max_length} is beyond {limit}), max_prompt_length "
               f"{prompt} (unset: the response budget of {response} tokens is kept, the "
               "prompt takes the rest)")
    else:
        what = (f"max_length {hp.max_length}" if "max_prompt_length" in given else
                f"max_length {hp.max_length} (a response budget of "
                f"{hp.max_length - hp.max_prompt_length} tokens, over half of it)")
        raise ConfigError(
            f"{what} is beyond {limit}", where=f"{WHERE}.max_length",
            hint=f"set max_length to at most {context}, or leave it unset to use the "
                 "model's context")
    fitted = type(hp).model_validate({**hp.model_dump(exclude_unset=True),
                                      "max_length": total, "max_prompt_length": prompt})
    return fitted, [f"lengths fitted to the model: {why}; set them in "
                    f"{WHERE} to choose"]


def fit_job(job: Any, model_dir: Optional[Path | str]) -> tuple[Any, list[str]]:
    """``job`` (a ``JobConfig``) with :func:`fit_lengths` applied for the policy in
    ``model_dir``, and the notes."""
    hp, notes = fit_lengths(job.hyper_parameters, model_context(model_dir),
                            model=str(job.model.name or model_dir))
    if not notes:
        return job, []
    return job.model_copy(update={"training": job.training.model_copy(
        update={"hyper_parameters": hp})}), notes
