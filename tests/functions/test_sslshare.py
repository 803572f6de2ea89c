"""``share_ssl_contexts``: the default TLS context is built once; a client's own is kept."""

from __future__ import annotations

import ssl

import certifi
import httpx
import httpx._transports.default as transports
import pytest

from rltune.functions import sslshare


@pytest.fixture
def shared(monkeypatch):
    """httpx wrapped for this test only (the original is put back after it)."""
    monkeypatch.setattr(transports, "create_ssl_context", transports.create_ssl_context)
    monkeypatch.delenv(sslshare.ENV, raising=False)
    assert sslshare.share_ssl_contexts(("httpx", "no_such_http_library")) == ["httpx"]
    return transports.create_ssl_context


def _ctx(client: httpx.AsyncClient) -> ssl.SSLContext:
    return client._transport._pool._ssl_context


def test_default_contexts_are_built_once_per_trust_setting(shared):
    assert _ctx(httpx.AsyncClient()) is _ctx(httpx.AsyncClient())
    insecure = _ctx(httpx.AsyncClient(verify=False))
    assert insecure is _ctx(httpx.AsyncClient(verify=False))
    assert insecure is not _ctx(httpx.AsyncClient())
    assert insecure.verify_mode == ssl.CERT_NONE  # what verify=False asks, shared or not
    assert sslshare.share_ssl_contexts(("httpx",)) == ["httpx"]  # again: not wrapped twice
    assert transports.create_ssl_context is shared


def test_a_clients_own_context_and_a_changed_ca_file_are_honoured(shared, monkeypatch):
    mine = ssl.create_default_context()
    assert _ctx(httpx.AsyncClient(verify=mine)) is mine
    default = _ctx(httpx.AsyncClient())
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())
    assert _ctx(httpx.AsyncClient()) is not default  # a new trust setting: a new context


def test_turned_off_by_the_environment(monkeypatch):
    monkeypatch.setattr(transports, "create_ssl_context", transports.create_ssl_context)
    monkeypatch.setenv(sslshare.ENV, "0")
    assert sslshare.share_ssl_contexts() == []
    assert _ctx(httpx.AsyncClient()) is not _ctx(httpx.AsyncClient())


def test_the_switch_reaches_the_workers(monkeypatch):
    from rltune.functions.sandbox import passed_env

    monkeypatch.setenv(sslshare.ENV, "0")
    assert passed_env()[sslshare.ENV] == "0"
