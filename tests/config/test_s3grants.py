"""``workspace=bucket[/prefix]`` grants: parsed strictly, matched on whole keys."""

from __future__ import annotations

import pytest

from rltune.config.download import fetch
from rltune.config.netguard import AddressPolicy
from rltune.config.s3grants import S3Grants
from rltune.sdk.errors import ConfigError, ValidationError


def test_a_grant_covers_its_bucket_or_prefix_for_its_workspace_only():
    g = S3Grants.parse("a=data/a/,b=whole")
    assert g.allows("a", "s3://data/a/x/train.jsonl")
    assert not g.allows("b", "s3://data/a/x/train.jsonl")
    assert not g.allows("a", "s3://data/b/train.jsonl")
    assert g.allows("b", "s3://whole/any.jsonl") and not g.allows("a", "s3://whole/any.jsonl")
    for key in ("a/../b/x", "a//x", "a/./x", ""):
        assert not g.allows("a", f"s3://data/{key}"), key


@pytest.mark.parametrize("bad", ["data", "=data", "a=", "a=Bad_Bucket", "a=data/../x/"])
def test_a_bad_grant_is_refused_naming_the_setting(bad):
    with pytest.raises(ConfigError, match="not a workspace=bucket") as err:
        S3Grants.parse(bad)
    assert err.value.where == "RLTUNE_S3_WORKSPACE_BUCKETS"


def test_with_a_policy_an_ungranted_bucket_is_refused_before_any_request(monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(ValidationError, match="'w'") as err:
        fetch("s3://other/x.jsonl", where="datasets[0].download_url", policy=AddressPolicy(),
              s3_grants=S3Grants.parse("w=mine"), workspace="w")
    assert err.value.where == "datasets[0].download_url"
    with pytest.raises(ValidationError, match="none"):
        fetch("s3://mine/x.jsonl", where="d", policy=AddressPolicy(), workspace="w")
