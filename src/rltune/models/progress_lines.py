"""Plain progress lines of a model build, for logs and pipes (CI), where no live display runs.

One line per note (resuming, waiting for another build), for the first step, for every
evaluation, and at least one every :data:`LINE_EVERY_S` seconds in between::

    nano: step 25/900 copy loss 0.812 acc 0.10 tool 0.80/0.40 (12 s)

``acc`` is the last evaluation's held-out accuracy, ``tool`` how often the tool was used and
how often it was then right, and the time in brackets is this process's elapsed time.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

#: Most seconds between two progress lines between evaluations.
LINE_EVERY_S = 10.0


def stderr_line(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def line_progress(
    name: str, write: Callable[[str], None] = stderr_line, every_s: float = LINE_EVERY_S
) -> Callable[[dict[str, Any]], None]:
    """A ``progress`` callback for ``ensure_demo_model`` that ``write``s lines (see above)."""
    started = time.monotonic()
    last = [-every_s]
    acc = {"accuracy": "-", "tool_rate": "-", "tool_accuracy": "-"}

    def on_event(event: dict[str, Any]) -> None:
        if "message" in event:
            write(event["message"])
            return
        now = time.monotonic()
        if event["phase"] == "eval":
            acc.update({k: f"{event[k]:.2f}" for k in acc})
        elif now - last[0] < every_s:
            return
        last[0] = now
        phase = event.get("curriculum") or ""
        write(f"{name}: step {event['step']}/{event['max_steps']} {phase} loss "
              f"{event['loss']:.3f} acc {acc['accuracy']} tool {acc['tool_rate']}/"
              f"{acc['tool_accuracy']} ({now - started:.0f} s)".replace("  ", " "))

    return on_event
