"""Which destinations a sandboxed command may reach through the runtime's proxy (pure, no I/O).

A granted network is not the host's network: the sandbox keeps its own (empty) network namespace and reaches
the outside only through :mod:`.netproxy`, which asks :func:`decide` about every request *after resolving the
name itself* and then connects to an address it has checked (so a name that resolves differently a moment
later, DNS rebinding, cannot move the connection somewhere else).

Two independent gates, both must pass:

* **the name**: the host must match one of the grant's domain patterns, with the same syntax and meaning as
  the grants' ``WebFetch(domain:…)`` rules (:mod:`ouroactors.authorities.grants.rules`): ``example.com``
  exactly, ``*.example.com`` its subdomains only (not ``example.com`` itself, nor ``example.com.evil.net``),
  ``*`` any host name. An IPv4 literal is a host name to those rules; an IPv6 literal is not (a rule cannot
  name one), so it is refused. A name is compared as :func:`normalise_host` spells it (lower case, without the
  root's trailing dot: ``Example.COM.`` is ``example.com``), and so are the patterns. A caller that adds a
  request's host to a policy takes it from :func:`policy_name`, which refuses, with the reason, a host no policy
  can name — before anyone is asked to approve a request that could only fail;
* **the addresses**: every address the name resolved to must be public. Loopback, link-local, private,
  multicast, unspecified, reserved and other non-global addresses (IPv4 and IPv6, looking through
  v4-mapped, NAT64 and 6to4 forms to the IPv4 address inside) are refused unless the policy's ``private``
  list names them — by network (``127.0.0.1/32``, ``10.0.0.0/8``) or by host pattern (``db.internal``).
  Unspecified and multicast addresses are refused even then: ``0.0.0.0`` reaches the proxy host's own
  loopback and multicast is no TCP peer. A name resolving to both public and refused addresses is refused
  as a whole (a mixed answer is how rebinding attacks start).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.errors import OuroactorsError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# the grants' host syntax (ouroactors.authorities.grants.rules._HOST): a cross-check test keeps them equal
_HOST = re.compile(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
NEVER = ("unspecified", "multicast")  # refused even when a private rule names them


class NetworkPolicyError(OuroactorsError, ValueError):
    """A network grant that cannot be honoured as written (a bad domain pattern or private entry)."""


def _pattern_ok(pattern: str) -> bool:
    return pattern == "*" or bool(_HOST.fullmatch(pattern.removeprefix("*.")))


def normalise_host(host: str) -> str | None:
    """The host as the rules see it (lower case, no trailing dot, no IPv6 brackets), or None if not a host."""
    text = host.strip().lower().rstrip(".")
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    if _HOST.fullmatch(text):
        return text
    try:
        addr = ipaddress.IPv6Address(text)
    except ValueError:
        return None
    # an IPv4-mapped address in dotted form (RFC 5952 §5), as Python 3.13 prints it and 3.11 did not (::ffff:7f00:1):
    # one spelling on every Python, in refusals and records
    return f"::ffff:{addr.ipv4_mapped}" if addr.ipv4_mapped is not None else str(addr)


def policy_name(host: str) -> str:
    """``host`` as a network grant and this policy name it (:func:`normalise_host`), or :class:`NetworkPolicyError`
    saying why none can: not a host at all, or an IPv6 literal (rules and patterns name host names and IPv4
    addresses only)."""
    name = normalise_host(host)
    if name is None:
        raise NetworkPolicyError(f"{host!r} is not a host name")
    if not _HOST.fullmatch(name):
        raise NetworkPolicyError(f"{name} is an IPv6 address literal: network rules and policies name host names and "
                                 "IPv4 addresses only, so no grant can admit it; use a host name that resolves to it")
    return name


def _without_root_dot(pattern: str) -> str:
    """``example.com.`` is ``example.com`` (the root's dot); what is not a pattern without it is left as it was."""
    bare = pattern.removesuffix(".")
    return bare if bare != pattern and bare != "*" and _pattern_ok(bare) else pattern


def host_matches(host: str, pattern: str) -> bool:
    """Does one ``WebFetch(domain:…)`` pattern cover the (normalised) host? IPv6 literals never match."""
    if not _HOST.fullmatch(host):
        return False
    return pattern == "*" or host == pattern or (pattern.startswith("*.") and host.endswith(pattern[1:]))


@dataclass(frozen=True)
class NetworkPolicy:
    """A network grant: the domain patterns a command may reach, and the non-public destinations allowed."""

    domains: tuple[str, ...] = ("*",)
    private: tuple[str, ...] = ()  # networks ("127.0.0.1/32") or host patterns allowed to be non-public

    def __post_init__(self) -> None:
        for name in ("domains", "private"):
            value = getattr(self, name)
            if isinstance(value, str | bytes) or not all(isinstance(v, str) for v in value):
                raise NetworkPolicyError(f"network policy {name} must be a tuple of strings, got {value!r}")
            object.__setattr__(self, name, tuple(_without_root_dot(v.strip().lower()) for v in value))
        for pattern in self.domains:
            if not _pattern_ok(pattern):
                raise NetworkPolicyError(f"bad domain pattern {pattern!r} in network policy domains "
                                         "(example.com, *.example.com or *)")
        for entry in self.private:
            if _network(entry) is None and not _pattern_ok(entry):
                raise NetworkPolicyError(f"bad entry {entry!r} in network policy private "
                                         "(a network such as 127.0.0.1/32, or a host pattern)")

    def describe(self) -> str:
        """``proxy(a.com, *.b.org; private: 127.0.0.1/32)`` — what a :class:`Boundary` reports."""
        inner = ", ".join(self.domains) or "no domains"
        if self.private:
            inner += "; private: " + ", ".join(self.private)
        return f"proxy({inner})"


def _network(entry: str) -> IPNetwork | None:
    try:
        return ipaddress.ip_network(entry, strict=False)
    except ValueError:
        return None


def parse_address(text: str) -> IPAddress | None:
    """An address from ``getaddrinfo`` (maybe with ``%scope``), or None when it is not one."""
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None


def embedded_ipv4(addr: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries and routes to (v4-mapped, NAT64, 6to4), if any."""
    if isinstance(addr, ipaddress.IPv4Address):
        return None
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr in _NAT64:
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return addr.sixtofour


def category(addr: IPAddress) -> str:
    """``public`` or the first reason the address is not: loopback, link-local, private, multicast, ..."""
    inner = embedded_ipv4(addr)
    if inner is not None and isinstance(addr, ipaddress.IPv6Address) and (addr.ipv4_mapped or addr in _NAT64):
        return category(inner)  # the packet goes to the IPv4 address: judge that
    if inner is not None and category(inner) != "public":  # 6to4: a route towards the IPv4 inside
        return category(inner)
    if addr.is_unspecified:
        return "unspecified"
    if addr.is_loopback:
        return "loopback"
    if addr.is_link_local:
        return "link-local"
    if addr.is_multicast:
        return "multicast"
    if addr.is_reserved:
        return "reserved"
    if addr.is_private:
        return "private"
    if isinstance(addr, ipaddress.IPv6Address) and addr.is_site_local:
        return "site-local"
    if not addr.is_global:
        return "non-global"
    return "public"


def private_allowed(host: str, addr: IPAddress, kind: str, policy: NetworkPolicy) -> bool:
    """Does an explicit ``private`` entry name this non-public destination (by address or by host)?"""
    if kind in NEVER:
        return False
    inner = embedded_ipv4(addr)
    for entry in policy.private:
        net = _network(entry)
        if net is not None:
            if addr in net or (inner is not None and inner in net):
                return True
        elif host_matches(host, entry):
            return True
    return False


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    reason: str
    address: str | None = None  # the checked address to connect to (when allowed)


def check_name(host: str, port: int, policy: NetworkPolicy) -> Verdict:
    """The first gate alone (before any DNS query): is ``host:port`` a granted name and a valid port?"""
    name = normalise_host(host)
    if name is None:
        return Verdict(False, f"{host!r} is not a host name")
    if not 0 < port < 65536:
        return Verdict(False, f"{name}: port {port} is out of range")
    rule = next((p for p in policy.domains if host_matches(name, p)), None)
    if rule is None:
        return Verdict(False, f"{name} is not in the granted domains ({', '.join(policy.domains) or 'none'})")
    return Verdict(True, f"{name} allowed by domain rule {rule!r}")


def decide(host: str, port: int, addresses: Sequence[str], policy: NetworkPolicy) -> Verdict:
    """May the proxy connect to ``host:port``, which resolved to ``addresses``? The reason names the host."""
    named = check_name(host, port, policy)
    if not named.allowed:
        return named
    name = normalise_host(host) or host
    if not addresses:
        return Verdict(False, f"{name} did not resolve to any address")
    checked: list[IPAddress] = []
    for text in addresses:
        addr = parse_address(text)
        if addr is None:
            return Verdict(False, f"{name} resolved to {text!r}, which is not an address")
        kind = category(addr)
        if kind != "public" and not private_allowed(name, addr, kind, policy):
            return Verdict(False, f"{name} resolves to {addr} ({kind}); no private rule names it")
        checked.append(addr)
    return Verdict(True, named.reason, str(checked[0]))
