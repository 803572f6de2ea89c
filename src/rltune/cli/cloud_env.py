"""Environment variables only the clouds read, and the one note rltune prints about them.

Bailian's guide has users export ``FC_PYPI_LIB`` (the dashscope wheel its function containers
install; the SDK passes it on as ``FC_SDK_PACKAGE``); Ark's ``ark login`` keeps ``VOLC_ACCESSKEY``
/ ``VOLC_SECRETKEY``. rltune's workers run in this machine's Python environment and need no
cloud login, so a user who kept them set gets one line saying so, not an error.

Example:
    >>> note = cloud_only_note({"FC_PYPI_LIB": "dashscope-1.25.23-py3-none-any.whl"})
    >>> note.split(" (")[0]
    'note: FC_PYPI_LIB is not needed here'
    >>> cloud_only_note({}) is None
    True
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Optional

#: Cloud-only variable → why rltune does not need it.
CLOUD_ONLY_ENV: dict[str, str] = {
    "FC_PYPI_LIB": "rltune runs functions with the packages of this Python environment; "
                   "install them with pip",
    "FC_SDK_PACKAGE": "rltune runs functions with the packages of this Python environment; "
                      "install them with pip",
    "VOLC_ACCESSKEY": "rltune needs no cloud login (the local admin key or RLTUNE_API_KEY)",
    "VOLC_SECRETKEY": "rltune needs no cloud login (the local admin key or RLTUNE_API_KEY)",
}


def cloud_only_note(environ: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """One line naming the cloud-only variables set in ``environ`` (None when there are none)."""
    env = os.environ if environ is None else environ
    found = [name for name in CLOUD_ONLY_ENV if env.get(name)]
    if not found:
        return None
    reasons = list(dict.fromkeys(CLOUD_ONLY_ENV[n] for n in found))
    names = ", ".join(found)
    verb = "is" if len(found) == 1 else "are"
    return f"note: {names} {verb} not needed here ({'; '.join(reasons)})"
