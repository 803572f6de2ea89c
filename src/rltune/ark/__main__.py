"""``python -m rltune.ark SCRIPT [ARGS…]``: run an Ark script (``job.py``, a plugin's local
test) with ``import ark_sdk…`` served by rltune and the script's folder on ``sys.path``.

``python -m rltune.ark VERB …`` (``login``, ``logout``, ``init``, ``create``, ``list``, ``get``,
``pull``, ``test``):
Ark's CLI verbs, the same as ``rltune ark VERB …`` (this entry point hands them to the rltune
command line)."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pydantic

from rltune.ark import install_as_ark_sdk
from rltune.sdk.errors import RltuneError

#: Ark's CLI verbs (``ark VERB NOUN``), served by ``rltune ark``.
VERBS = ("login", "logout", "init", "create", "list", "get", "pull", "test")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m rltune.ark SCRIPT [ARGS...] | python -m rltune.ark "
              f"{{{','.join(VERBS)}}} ...", file=sys.stderr)
        return 2
    if args[0] in VERBS and not Path(args[0]).is_file():
        sys.argv = ["rltune", "ark", *args]  # the command line's entry point, as a process
        try:
            runpy.run_module("rltune.cli.main", run_name="__main__")
        except SystemExit as exc:
            return int(exc.code or 0) if not isinstance(exc.code, str) else 1
        return 0
    script = Path(args[0]).resolve()
    if not script.is_file():
        print(f"error: {args[0]} is not a file", file=sys.stderr)
        return 2
    install_as_ark_sdk()
    sys.argv = [str(script), *args[1:]]
    sys.path.insert(0, str(script.parent))
    try:
        runpy.run_path(str(script), run_name="__main__")
    except RltuneError as exc:  # a bad job definition: the message, not a traceback
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except pydantic.ValidationError as exc:  # e.g. ModelCustomizationJob(...) without data
        for err in exc.errors(include_url=False):
            field = ".".join(str(p) for p in err["loc"]) or "(the object)"
            print(f"error: {exc.title}.{field}: {err['msg']}", file=sys.stderr)
        print(f"fix: see the Ark definition of {exc.title} (docs/ark.md)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
