"""``python -m rltune.reinforcement SCRIPT [ARGS…]``: run a script written for the Bailian SDK
(``submit_job.py``, ``test_functions.py``) with ``import dashscope.finetune…`` served by
rltune and the script's folder on ``sys.path``.

``python -m rltune.reinforcement VERB …`` (``rl run -c job.yaml``, ``register_functions``, …):
the cloud CLI's verbs, the same as ``rltune VERB …`` (the twin of ``python -m rltune.ark``).

A real ``dashscope`` package in the environment wins over rltune's names (the alias never
shadows it): then a warning says so, and the script runs against the real package."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

from rltune.reinforcement.alias import dashscope_warning, install_as_dashscope
from rltune.sdk.errors import RltuneError


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m rltune.reinforcement SCRIPT [ARGS...] | python -m "
              "rltune.reinforcement VERB ... (rltune's verbs: rl run, register_functions, ...)",
              file=sys.stderr)
        return 2
    script = Path(args[0])
    if not script.is_file():
        if script.suffix == ".py" or "/" in args[0]:
            print(f"error: {args[0]} is not a file", file=sys.stderr)
            return 2
        sys.argv = ["rltune", *args]  # the command line's entry point, as a process
        try:
            runpy.run_module("rltune.cli.main", run_name="__main__")
        except SystemExit as exc:
            return int(exc.code or 0) if not isinstance(exc.code, str) else 1
        return 0
    warning = dashscope_warning()
    if warning:
        print(warning, file=sys.stderr)
    install_as_dashscope()
    script = script.resolve()
    sys.argv = [str(script), *args[1:]]
    sys.path.insert(0, str(script.parent))
    try:
        runpy.run_path(str(script), run_name="__main__")
    except RltuneError as exc:  # a bad job definition or a refused call: the message
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
