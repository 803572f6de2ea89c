"""Which network addresses a URL from a tenant may reach from the job server.

The job server fetches ``download_url`` datasets and checks MLflow ``uri`` trackers for its
tenants. An address is allowed when it is public (``ipaddress``'s ``is_global``, not
multicast); private, loopback, link-local (cloud metadata at 169.254.169.254), multicast,
reserved and unspecified addresses are refused, unless they fall in one of the networks the
operator allows (``--url-allow-networks``, ``RLTUNE_URL_ALLOW_NETWORKS``; default none). IPv6
forms that carry an IPv4 address (``EMBEDDING``: IPv4-compatible ``::a.b.c.d``, IPv4-translated,
NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``, Teredo) and the deprecated site-local
``fec0::/10`` are refused too, whatever they embed; an IPv4-mapped address
(``::ffff:a.b.c.d``) is judged as the IPv4 address it maps.

The host is resolved once and the connection goes to the address that was checked (no second
lookup that DNS rebinding could answer differently); each redirect is checked the same way.

Example:
    >>> p = AddressPolicy.parse("10.0.0.0/8")
    >>> p.permits("10.1.2.3"), p.permits("127.0.0.1"), p.permits("169.254.169.254")
    (True, False, False)
    >>> p.permits("8.8.8.8"), p.permits("::ffff:127.0.0.1"), p.permits("64:ff9b::808:808")
    (True, False, False)
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Union

from rltune.sdk.errors import ConfigError, ValidationError

Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
ENV_VAR = "RLTUNE_URL_ALLOW_NETWORKS"
#: IPv6 networks whose addresses carry an IPv4 address (or route to one), and site-local.
EMBEDDING: dict[str, ipaddress.IPv6Network] = {name: ipaddress.IPv6Network(net) for name, net in (
    ("IPv4-compatible", "::/96"), ("IPv4-translated", "::ffff:0:0:0/96"),
    ("NAT64", "64:ff9b::/96"), ("local NAT64", "64:ff9b:1::/48"), ("6to4", "2002::/16"),
    ("Teredo", "2001::/32"), ("site-local", "fec0::/10"))}


def _address(ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """``ip`` as an address; an IPv4-mapped IPv6 address as the IPv4 address it maps."""
    addr = ipaddress.ip_address(ip.split("%", 1)[0])
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def _embedding(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if isinstance(addr, ipaddress.IPv6Address):
        return next((name for name, net in EMBEDDING.items() if addr in net), None)
    return None


def _kind(addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    embedding = _embedding(addr)
    if embedding and not (addr.is_loopback or addr.is_unspecified):  # ::1 and :: in ::/96
        return f"{embedding} IPv6"
    for attr in ("loopback", "link_local", "multicast", "unspecified", "reserved", "private"):
        if getattr(addr, f"is_{attr}"):
            return attr.replace("_", "-")
    return "non-public"


@dataclass(frozen=True)
class AddressPolicy:
    """Public addresses, plus the networks in ``allow``."""

    allow: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, networks: Union[str, Iterable[str], None]) -> AddressPolicy:
        """From ``"10.0.0.0/8,192.168.1.5"`` or a list of such items; a bad item is refused."""
        items = networks.split(",") if isinstance(networks, str) else list(networks or [])
        nets = []
        for item in (str(i).strip() for i in items):
            if not item:
                continue
            try:
                nets.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ConfigError(f"{item!r} is not an IP network", where=ENV_VAR,
                                  hint="use CIDR networks separated by commas, such as "
                                       "10.0.0.0/8,192.168.1.5/32") from None
        return cls(tuple(nets))

    def permits(self, ip: str) -> bool:
        addr = _address(ip)
        if any(addr in net for net in self.allow):
            return True
        return addr.is_global and not addr.is_multicast and _embedding(addr) is None

    def resolve(self, host: str, port: int, *, where: str) -> str:
        """The address to connect to for ``host``: every address it resolves to must be
        allowed (else ``ValidationError`` naming the address and ``where``)."""
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (socket.gaierror, UnicodeError) as exc:
            raise ValidationError(f"cannot resolve the host {host!r}: {exc}", where=where,
                                  hint="check the address") from None
        ips = list(dict.fromkeys(str(info[4][0]) for info in infos))
        if not ips:
            raise ValidationError(f"the host {host!r} has no address", where=where,
                                  hint="check the address")
        for ip in ips:
            if not self.permits(ip):
                kind = _kind(_address(ip))
                raise ValidationError(
                    f"refused: {host!r} is a {kind} address ({ip}); the job server only "
                    "connects to public addresses for a tenant", where=where,
                    hint="use a public address, or upload the file; the server's operator can "
                    f"allow networks with {ENV_VAR} (docs/security.md)")
        return ips[0]


def probe_tcp(ip: str, port: int, *, timeout: float, where: str, what: str) -> None:
    """Refuse (``ConfigError``) when ``ip:port`` does not accept a connection in ``timeout``."""
    try:
        with socket.create_connection((ip, port), timeout=timeout):
            return
    except OSError as exc:
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
        raise ConfigError(f"{what} is not reachable ({reason} within {timeout:g} s)",
                          where=where, hint="start it, fix the address, or remove the "
                          "tracker; the job would otherwise wait minutes on retries") from None
