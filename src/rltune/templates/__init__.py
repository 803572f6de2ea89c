"""Workspace templates (``rltune init workspace DIR --template NAME``).

Example:
    >>> import tempfile, pathlib
    >>> ws = create_workspace(pathlib.Path(tempfile.mkdtemp()) / "agent", train_rows=4, val_rows=2)
    >>> sorted(p.name for p in (ws / "data").iterdir())
    ['train.jsonl', 'val.jsonl']
"""

from __future__ import annotations

import shutil
from pathlib import Path

from rltune.sdk.errors import ValidationError

TEMPLATES_DIR = Path(__file__).parent


def available() -> list[str]:
    """Names of the shipped templates."""
    return sorted(p.name for p in TEMPLATES_DIR.iterdir() if (p / "job.yaml").is_file())


def create_workspace(
    directory: str | Path,
    template: str = "calc",
    *,
    train_rows: int = 2000,
    val_rows: int = 64,
    seed: int = 0,
    force: bool = False,
) -> Path:
    """Copy ``template`` (functions/, job.yaml, requirements.txt) and generate its data/."""
    names = available()
    if template not in names:
        raise ValidationError(
            f"unknown template {template!r}", where="template", hint=f"choose one of {names}"
        )
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()) and not force:
        raise ValidationError(
            f"{directory} is not empty",
            where=str(directory),
            hint="use --force to write into it, or pick a new folder",
        )
    shutil.copytree(
        TEMPLATES_DIR / template,
        directory,
        dirs_exist_ok=True,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    if template in ("calc", "rl_demo"):
        from rltune.models.recipes import recipe_for
        from rltune.models.tasks import make_dataset_rows, write_jsonl

        # The same kind of question the demo models were warm-started on.
        task = recipe_for("nano").config.task
        shape = _ark_row if template == "rl_demo" else (lambda row: row)
        write_jsonl(
            map(shape, make_dataset_rows(train_rows, "train", seed=seed, config=task)),
            directory / "data" / "train.jsonl",
        )
        write_jsonl(
            map(shape, make_dataset_rows(val_rows, "heldout", seed=seed, config=task)),
            directory / "data" / "val.jsonl",
        )
    if template == "multistep":
        from rltune.models.multistep import make_multistep_rows
        from rltune.models.recipes import recipe_for
        from rltune.models.tasks import write_jsonl

        chains = recipe_for("nano", "multistep").config.task  # what the demo model learned
        write_jsonl(make_multistep_rows(train_rows, "train", seed=seed, config=chains),
                    directory / "data" / "train.jsonl")
        write_jsonl(make_multistep_rows(val_rows, "heldout", seed=seed, config=chains),
                    directory / "data" / "val.jsonl")
    if template == "rl_demo":
        _weather_rows(directory / "data" / "weather.jsonl")
    if template == "search-mcp":
        _search_rows(directory / "data", train_rows, val_rows)
    if template == "agentic-rl-example":  # the Bailian demo's file names and row shape
        from rltune.models.recipes import recipe_for
        from rltune.models.tasks import make_dataset_rows, write_jsonl

        task = recipe_for("nano").config.task
        train = make_dataset_rows(train_rows, "train", seed=seed, config=task)
        val = make_dataset_rows(val_rows, "heldout", seed=seed, config=task)
        data = directory / "data"
        write_jsonl(train, data / "calc_train.jsonl")  # the full sets, and the smaller
        write_jsonl(val, data / "calc_validation.jsonl")  # ones the demo's jobs use (_min)
        write_jsonl(train[:_MIN_TRAIN], data / "calc_train_min.jsonl")
        write_jsonl(val[:_MIN_VAL], data / "calc_validation_min.jsonl")
    if template == "rl_search_mcp_demo":
        _ark_search_workspace(directory, train_rows)
    return directory


#: Rows of the Bailian demo's ``calc_*_min.jsonl`` (its jobs' data): the first of the full sets.
_MIN_TRAIN, _MIN_VAL = 256, 16


def _ark_search_workspace(directory: Path, rows: int) -> None:
    """Ark's search demo: the MCP server and corpus of ``search-mcp`` and the local test's
    ``plugins/test_utils.py`` of ``rl_demo`` (one copy of each in the package), and the
    questions as Ark samples (``data/search_dataset_dev_100.jsonl``)."""
    import json

    from rltune.models.tasks import write_jsonl

    src = TEMPLATES_DIR / "search-mcp"
    (directory / "data").mkdir(parents=True, exist_ok=True)
    shutil.copy2(src / "mcp_server.py", directory / "mcp_server.py")
    shutil.copy2(TEMPLATES_DIR / "rl_demo" / "plugins" / "test_utils.py",
                 directory / "plugins" / "test_utils.py")
    (directory / "corpus").mkdir(exist_ok=True)
    shutil.copy2(src / "corpus" / "corpus.jsonl", directory / "corpus" / "corpus.jsonl")
    qs = [json.loads(x) for x in (src / "data" / "questions.jsonl").read_text().splitlines()
          if x]
    write_jsonl(({"messages": [{"role": "system", "content": SEARCH_PROMPT},
                               {"role": "user", "content": qs[i % len(qs)]["question"]}],
                  "extra": {"answer": qs[i % len(qs)]["answer"]}}
                 for i in range(min(rows, 100))), directory / "data" /
                "search_dataset_dev_100.jsonl")


#: (city, condition, °C) of the weather variant's rows: the table of
#: rl_demo/plugins/weather_rollout.py.
_WEATHER = (("Beijing", "sunny", 26), ("Shanghai", "rainy", 22), ("Hangzhou", "cloudy", 24),
            ("Shenzhen", "stormy", 29), ("Chengdu", "foggy", 18), ("Harbin", "snowy", -8))


def _weather_rows(path: Path) -> None:
    """The weather variant's prompts in Ark's sample shape (answer and condition in extra)."""
    from rltune.models.tasks import write_jsonl

    asks = ("What's the weather in {} today?", "Should I bring an umbrella in {}? Give the "
            "temperature too.", "How warm is it in {} right now?")
    write_jsonl(({"messages": [{"role": "user", "content": ask.format(city)}],
                  "extra": {"answer": str(temp), "condition": cond}}
                 for ask in asks for city, cond, temp in _WEATHER), path)


SEARCH_PROMPT = ("You answer questions by searching. Call the search tool, read the passages, "
                 "then end with ### ANSWER: <answer> ###")
_SEARCH_HELD_OUT = 4


def _search_rows(data: Path, train_rows: int, val_rows: int) -> None:
    """Questions about the bundled corpus: the last few are held out for validation, the rest
    repeat to ``train_rows``."""
    import json

    from rltune.models.tasks import write_jsonl

    qs = [json.loads(x) for x in (data / "questions.jsonl").read_text().splitlines() if x]

    def row(q: dict) -> dict:
        return {"messages": [{"role": "system", "content": SEARCH_PROMPT},
                             {"role": "user", "content": q["question"]}],
                "rollout_extra": {"answer": q["answer"], "doc": q["doc"]}}

    train, held = qs[:-_SEARCH_HELD_OUT], qs[-_SEARCH_HELD_OUT:]
    write_jsonl([row(train[i % len(train)]) for i in range(train_rows)], data / "train.jsonl")
    write_jsonl([row(q) for q in held[:val_rows]], data / "val.jsonl")


def _ark_row(row: dict) -> dict:
    """A calculator row in Volcano Ark's sample shape: the answer in ``extra``."""
    return {"messages": row["messages"], "tools": row["tools"],
            "extra": {"answer": row["rollout_extra"]["solution"]}}
