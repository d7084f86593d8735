"""Where outbound requests to addresses someone else typed in may go (SSRF protection).

Shared by the tool webhooks (apps/tools/executors/webhook.py) and the knowledge import
(apps/knowledge/fetch.py). The host is resolved once and, unless private networks are allowed
(development, tests), every address it resolves to must be public — so a URL pointed at
127.0.0.1, 10.x, 169.254.169.254, [::127.0.0.1] … cannot probe our own network. The caller pins
its connection to the returned addresses (`apps.platform.http.CONNECT_TO`) so DNS rebinding between
the check and the call cannot send it elsewhere."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """IPv4 addresses an IPv6 address carries and may be routed to: IPv4-mapped (::ffff:a.b.c.d),
    IPv4-compatible (::a.b.c.d, deprecated), 6to4 (2002::/16), Teredo and NAT64."""
    found = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    if address in _IPV4_COMPATIBLE:
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    if any(address in network for network in _NAT64):
        found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return found


def address_is_public(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """A globally routable unicast address, whatever form it is written in."""
    if not address.is_global or address.is_multicast:
        return False
    if isinstance(address, ipaddress.IPv6Address):
        if address in _IPV4_COMPATIBLE:
            return False  # ::a.b.c.d: deprecated, never a real public destination
        return all(address_is_public(v4) for v4 in _embedded_ipv4(address))
    return True


def checked_addresses(
    url: str, *, allow_private: bool, allow_http: bool, http_refusal: str
) -> tuple[list[str], str]:
    """(the checked addresses in the resolver's order, why `url` may not be called or "").

    Only http(s) URLs with a host; plain http only when `allow_http` (else `http_refusal` is
    the reason). With `allow_private` an unresolvable host is left to the connection attempt
    (development) and any address is accepted; without it every resolved address must be
    public."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        return [], f"{url!r} is not an http(s) URL."
    if parts.scheme != "https" and not allow_http:
        return [], http_refusal
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError):
        if allow_private:
            return [], ""  # development: let the connection attempt report it
        return [], f"cannot resolve {parts.hostname!r}."
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos]
    if not allow_private:
        for address in addresses:
            if not address_is_public(address):
                return [], f"{parts.hostname!r} resolves to a non-public address ({address})."
    return list(dict.fromkeys(str(a) for a in addresses)), ""
