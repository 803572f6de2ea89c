"""Where sandboxed ``requirements.txt`` builds get packages: the operator's explicit setting.

A build starts from a minimal environment with a private ``HOME`` and sees no ``/etc/pip.conf``,
so the server's own pip configuration (``PIP_*``, ``pip.conf``, ``uv.toml``) never reaches it:
neither its index credentials nor anything else. Behind a private index the operator names what
builds use instead:

- ``RLTUNE_BUILD_INDEX_URL``: the package index (an ``http(s)://`` URL), or ``none`` for no
  index at all (only find-links and local paths);
- ``RLTUNE_BUILD_FIND_LINKS``: folders of wheels or sdists and/or ``http(s)://`` pages of
  links, separated by spaces; folders are mounted read-only in the sandbox at
  ``/build/find-links/<n>``;
- ``RLTUNE_BUILD_CA_BUNDLE``: a PEM file of CA certificates for the index, mounted read-only
  at ``/build/ca.pem``.

They reach pip and uv as their environment variables (``PIP_INDEX_URL``/``UV_INDEX_URL``,
``PIP_NO_INDEX``/``UV_NO_INDEX``, ``PIP_FIND_LINKS``/``UV_FIND_LINKS``,
``PIP_CERT``/``SSL_CERT_FILE``). The build runs tenant code (``setup.py``), which can read them:
put nothing there a tenant may not see (an index that needs no credentials on the server's
network, or one whose credentials only allow reading public packages).

Example:
    >>> import os
    >>> os.environ["RLTUNE_BUILD_INDEX_URL"] = "none"
    >>> env, mounts = build_sources(sandboxed=True)
    >>> env["PIP_NO_INDEX"], mounts
    ('1', {})
    >>> del os.environ["RLTUNE_BUILD_INDEX_URL"]
"""

from __future__ import annotations

import os
from pathlib import Path

from rltune.sdk.errors import ConfigError

INDEX_ENV = "RLTUNE_BUILD_INDEX_URL"
FIND_LINKS_ENV = "RLTUNE_BUILD_FIND_LINKS"
CA_ENV = "RLTUNE_BUILD_CA_BUNDLE"
#: Where the sandbox shows the operator's folders and CA bundle.
INSIDE_FIND_LINKS, INSIDE_CA = "/build/find-links", "/build/ca.pem"
_URL = ("http://", "https://")


def build_sources(sandboxed: bool) -> tuple[dict[str, str], dict[Path, str]]:
    """(installer variables, read-only mounts host path -> sandbox path) for a build, from
    the three settings; a bad setting raises ``ConfigError`` naming it."""
    env: dict[str, str] = {}
    mounts: dict[Path, str] = {}
    index = os.environ.get(INDEX_ENV, "").strip()
    if index.lower() == "none":
        env["PIP_NO_INDEX"] = env["UV_NO_INDEX"] = "1"
    elif index:
        if not index.startswith(_URL):
            raise ConfigError(f"{INDEX_ENV}={index!r} is not an http(s) URL", where=INDEX_ENV,
                              hint="give the index's simple URL (https://host/simple), "
                                   "'none' for no index, or unset it for the installer's")
        env["PIP_INDEX_URL"] = env["UV_INDEX_URL"] = index
    links = []
    for n, item in enumerate(os.environ.get(FIND_LINKS_ENV, "").split()):
        if item.startswith(_URL):
            links.append(item)
            continue
        folder = Path(item).expanduser()
        if not folder.is_absolute() or not folder.is_dir():
            raise ConfigError(f"{FIND_LINKS_ENV}: {item!r} is neither an http(s) URL nor an "
                              "existing folder (absolute path)", where=FIND_LINKS_ENV,
                              hint="list absolute folders of wheels or URLs, space-separated")
        inside = f"{INSIDE_FIND_LINKS}/{n}" if sandboxed else str(folder)
        if sandboxed:
            mounts[folder.resolve()] = inside
        links.append(inside)
    if links:
        env["PIP_FIND_LINKS"], env["UV_FIND_LINKS"] = " ".join(links), ",".join(links)
    ca = os.environ.get(CA_ENV, "").strip()
    if ca:
        path = Path(ca).expanduser()
        if not path.is_absolute() or not path.is_file():
            raise ConfigError(f"{CA_ENV}={ca!r} is not an existing file (absolute path)",
                              where=CA_ENV, hint="give the PEM file of the index's CA")
        inside = INSIDE_CA if sandboxed else str(path)
        if sandboxed:
            mounts[path.resolve()] = inside
        env["PIP_CERT"] = env["SSL_CERT_FILE"] = inside
    return env, mounts
