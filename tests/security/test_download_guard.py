"""Item 8, in the process: ``fetch`` with the server's address policy refuses non-public
targets after resolving them, on the first hop and on every redirect, and connects to the
address it checked. The resolver is stubbed; every connection goes to loopback, and a guard
fails the test if any socket is pointed anywhere else."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from rltune.config.download import fetch
from rltune.config.netguard import AddressPolicy
from rltune.sdk.errors import ValidationError

ROW = b'{"messages": [{"role": "user", "content": "1+1"}]}\n'


@pytest.fixture
def net(monkeypatch):
    """Stub names (``*.test``) to fixed addresses; record every connect; refuse non-loopback."""
    names = {}
    connects = []
    real_getaddrinfo = socket.getaddrinfo
    real_connect = socket.socket.connect

    def getaddrinfo(host, port, *args, **kwargs):
        if host in names:
            family = socket.AF_INET6 if ":" in names[host] else socket.AF_INET
            return [(family, socket.SOCK_STREAM, 6, "", (names[host], port))]
        assert str(host).endswith(".test") is False, f"unstubbed test name {host}"
        return real_getaddrinfo(host, port, *args, **kwargs)

    def connect(self, address):
        connects.append(address)
        assert str(address[0]) in ("127.0.0.1", "::1"), f"a packet to {address}"
        return real_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    return names, connects


@pytest.fixture
def loopback():
    """A loopback HTTP server: /data.jsonl answers rows, /hop redirects to ?to=…; it records
    each request's path and Host header."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Host")))
            if self.path.startswith("/hop?to="):
                self.send_response(302)
                self.send_header("Location", self.path.split("=", 1)[1])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(ROW)))
            self.end_headers()
            self.wfile.write(ROW)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv.server_address[1], seen
    srv.shutdown()


@pytest.mark.parametrize("ip, kind", [("169.254.169.254", "link-local"),
                                      ("10.0.0.5", "private"), ("127.0.0.1", "loopback"),
                                      ("224.0.0.1", "multicast"), ("::1", "loopback"),
                                      ("240.0.0.1", "reserved"), ("0.0.0.0", "unspecified"),
                                      # IPv6 forms that carry an IPv4 address (issue 37 item 5)
                                      ("::7f00:1", "IPv4-compatible"),
                                      ("::ffff:0:7f00:1", "IPv4-translated"),
                                      ("64:ff9b::7f00:1", "NAT64"),
                                      ("64:ff9b::a9fe:a9fe", "NAT64"),
                                      ("64:ff9b:1::a00:1", "local NAT64"),
                                      ("2002:7f00:1::", "6to4"), ("2002:808:808::1", "6to4"),
                                      ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"),
                                      ("fec0::1", "site-local")])
def test_a_name_that_resolves_to_a_non_public_address_is_refused_unsent(net, ip, kind):
    names, connects = net
    names["metadata.test"] = ip
    with pytest.raises(ValidationError) as err:
        fetch("http://metadata.test/latest/meta-data/", where="datasets[0].download_url",
              policy=AddressPolicy())
    assert kind in err.value.message and ip in err.value.message
    assert err.value.where == "datasets[0].download_url"
    assert connects == []


def test_a_redirect_to_a_non_public_address_is_refused(net, loopback):
    names, connects = net
    port, seen = loopback
    names["metadata.test"] = "169.254.169.254"
    allow_loopback = AddressPolicy.parse("127.0.0.1/32")  # the test's only reachable server
    with pytest.raises(ValidationError) as err:
        fetch(f"http://127.0.0.1:{port}/hop?to=http://metadata.test/latest",
              where="w", policy=allow_loopback)
    assert "link-local" in err.value.message
    assert [p for p, _ in seen] == ["/hop?to=http://metadata.test/latest"]
    assert all(a[0] == "127.0.0.1" for a in connects)


def test_an_allowed_name_is_fetched_from_the_checked_address_with_its_host(net, loopback):
    names, connects = net
    port, seen = loopback
    names["data.test"] = "127.0.0.1"
    body = fetch(f"http://data.test:{port}/hop?to=/data.jsonl", where="w",
                 policy=AddressPolicy.parse("127.0.0.0/8"))
    assert body == ROW
    assert seen == [("/hop?to=/data.jsonl", f"data.test:{port}"),
                    ("/data.jsonl", f"data.test:{port}")]
    assert connects and all(a == ("127.0.0.1", port) for a in connects)


def test_without_a_policy_local_tools_fetch_as_before(loopback):
    port, _ = loopback
    assert fetch(f"http://127.0.0.1:{port}/data.jsonl", where="w") == ROW


def test_the_allow_list_is_checked_when_the_server_starts():
    from rltune.server.settings import ServerSettings

    with pytest.raises(Exception, match="not an IP network"):
        ServerSettings(url_allow_networks="10.0.0.0/8,nonsense")
    assert ServerSettings(url_allow_networks="10.0.0.0/8").address_policy.permits("10.9.9.9")
    assert not ServerSettings().address_policy.permits("10.9.9.9")
