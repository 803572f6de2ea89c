"""The exit codes of every ``rltune`` command, defined here and nowhere else (docs/cli.md).

====  ===========  ==================================================================
code  name         meaning
====  ===========  ==================================================================
0     OK           done
1     FAILED       it ran and failed: a job that FAILED, a refused or failed request
2     USAGE        nothing ran: a bad option, config, file or name (click's own code)
3     ALERTS       ``rltune doctor <job>``: the job has alerts
4     UNREACHABLE  no rltune server answers at the address used (RLTUNE_BASE_URL)
130   INTERRUPTED  Ctrl-C
====  ===========  ==================================================================
"""

from __future__ import annotations

OK = 0
FAILED = 1
USAGE = 2
ALERTS = 3
UNREACHABLE = 4
INTERRUPTED = 130


def for_error(exc: BaseException, default: int = FAILED) -> int:
    """The code for an error a command reports: UNREACHABLE for a server that does not
    answer, ``default`` otherwise."""
    from rltune.sdk.errors import ServerUnreachableError

    return UNREACHABLE if isinstance(exc, ServerUnreachableError) else default
