"""Which ``s3://`` buckets (or prefixes) the job server reads for which workspace.

The job server reads ``s3://`` datasets with its operator's credentials (``AWS_*``), so a
tenant naming any bucket would have the server sign requests for it. On the job server an
``s3://`` address is therefore read only when the operator gave the caller's workspace that
bucket or a prefix of it: ``--s3-workspace-buckets`` / ``RLTUNE_S3_WORKSPACE_BUCKETS``, a
comma-separated list of ``workspace=bucket`` or ``workspace=bucket/prefix`` (default none:
no ``s3://`` on the server). ``rltune train`` on one's own machine reads any bucket with one's
own credentials.

Example:
    >>> g = S3Grants.parse("team-a=rl-data/team-a/, team-b=shared")
    >>> g.allows("team-a", "s3://rl-data/team-a/train.jsonl"), g.allows("team-a", "s3://shared/x")
    (True, False)
    >>> g.allows("team-b", "s3://shared/any/key.jsonl"), g.allows("team-a", "s3://rl-data/b/x")
    (True, False)
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Union
from urllib.parse import urlsplit

from rltune.sdk.errors import ConfigError, ValidationError

ENV_VAR = "RLTUNE_S3_WORKSPACE_BUCKETS"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def split_s3(url: str) -> tuple[str, str]:
    """``(bucket, key)`` of ``s3://bucket/key``."""
    parts = urlsplit(url)
    return parts.netloc, parts.path.lstrip("/")


@dataclass(frozen=True)
class S3Grants:
    """``(workspace, bucket, key prefix)`` triples; an empty prefix is the whole bucket."""

    grants: tuple[tuple[str, str, str], ...] = ()

    @classmethod
    def parse(cls, text: Union[str, Iterable[str], None]) -> S3Grants:
        items = text.split(",") if isinstance(text, str) else list(text or [])
        grants = []
        for item in (str(i).strip() for i in items):
            if not item:
                continue
            workspace, eq, target = item.partition("=")
            bucket, _, prefix = target.strip().partition("/")
            if not eq or not workspace.strip() or not _BUCKET.match(bucket) or \
                    any(seg in (".", "..") for seg in prefix.split("/")[:-1]):
                raise ConfigError(f"{item!r} is not a workspace=bucket[/prefix] grant",
                                  where=ENV_VAR, hint="use items such as team-a=rl-data or "
                                  "team-a=rl-data/team-a/, separated by commas")
            grants.append((workspace.strip(), bucket, prefix))
        return cls(tuple(grants))

    def allows(self, workspace: str, url: str) -> bool:
        bucket, key = split_s3(url)
        if not key or any(seg in ("", ".", "..") for seg in key.split("/")):
            return False  # no key that a client could normalize into another prefix
        return any(w == workspace and b == bucket and key.startswith(p)
                   for w, b, p in self.grants)

    def check(self, workspace: str, url: str, *, where: str) -> None:
        """Refuse (``ValidationError``, before any request) an address not granted."""
        if self.allows(workspace, url):
            return
        given = [f"s3://{b}/{p}" for w, b, p in self.grants if w == workspace]
        raise ValidationError(
            f"refused: {url} is not in a bucket the job server's operator gave the workspace "
            f"{workspace!r} ({', '.join(given) or 'none'}); the server reads s3:// with its "
            "own credentials", where=where,
            hint=f"upload the file, use an https:// address, or ask the operator to add "
                 f"{workspace}=<bucket>[/<prefix>] to {ENV_VAR} (docs/security.md)")
