"""The proxy's decision (pure): granted names, public addresses only unless a private rule names them."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from ouroactors.authorities.grants.rules import Decision, Effect, Request, parse_rule
from ouroactors.authorities.grants.rules import decide as grants_decide
from ouroactors.runtime.sandbox_netpolicy import (
    NetworkPolicy,
    NetworkPolicyError,
    category,
    check_name,
    decide,
    host_matches,
    normalise_host,
)

ANY = NetworkPolicy(("*",))

# (address, category): every refused range, IPv4 and IPv6, and the IPv6 forms that carry an IPv4 inside
REFUSED = [
    ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback"), ("::1", "loopback"),
    ("0.0.0.0", "unspecified"), ("::", "unspecified"),
    ("169.254.169.254", "link-local"), ("fe80::1", "link-local"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"), ("192.168.1.1", "private"),
    ("fc00::1", "private"), ("fd12:3456::1", "private"),
    ("224.0.0.1", "multicast"), ("239.255.255.250", "multicast"), ("ff02::1", "multicast"),
    ("240.0.0.1", "reserved"), ("255.255.255.255", "reserved"),
    ("100.64.0.1", "non-global"), ("192.0.2.1", "private"), ("198.18.0.1", "private"),
    ("::ffff:127.0.0.1", "loopback"), ("::ffff:10.0.0.1", "private"), ("::ffff:169.254.169.254", "link-local"),
    ("64:ff9b::7f00:1", "loopback"), ("64:ff9b::a00:1", "private"), ("2002:7f00:1::", "loopback"),
    ("2002:c0a8:101::1", "private"), ("fec0::1", "site-local"), ("::7f00:1", "reserved"),
]
PUBLIC = ["93.184.216.34", "1.1.1.1", "8.8.8.8", "2606:4700:4700::1111", "::ffff:93.184.216.34",
          "64:ff9b::808:808", "2a00:1450:4001:82b::200e"]


@pytest.mark.parametrize("address,kind", REFUSED)
def test_every_non_public_range_is_refused_and_named(address: str, kind: str) -> None:
    assert category(ipaddress.ip_address(address)) == kind
    verdict = decide("api.example.com", 443, [address], ANY)
    assert not verdict.allowed and verdict.address is None
    assert verdict.reason == f"api.example.com resolves to {ipaddress.ip_address(address)} ({kind}); " \
                             "no private rule names it"


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    verdict = decide("api.example.com", 443, [address], ANY)
    assert verdict.allowed and verdict.address == str(ipaddress.ip_address(address))
    assert verdict.reason == "api.example.com allowed by domain rule '*'"


@given(st.ip_addresses(v=4))
def test_v4_mapped_and_nat64_forms_decide_like_the_ipv4_inside(v4: ipaddress.IPv4Address) -> None:
    plain = decide("h.example", 80, [str(v4)], ANY).allowed
    mapped = ipaddress.IPv6Address(int(ipaddress.IPv6Address("::ffff:0:0")) | int(v4))
    nat64 = ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | int(v4))
    assert decide("h.example", 80, [str(mapped)], ANY).allowed == plain
    if not plain:
        assert not decide("h.example", 80, [str(nat64)], ANY).allowed


@given(st.ip_addresses())
def test_only_global_unicast_addresses_pass_without_a_private_rule(addr: ipaddress._BaseAddress) -> None:
    allowed = decide("h.example", 443, [str(addr)], ANY).allowed
    if allowed:
        assert addr.is_global and not addr.is_multicast and not addr.is_loopback and not addr.is_private


@given(st.lists(st.sampled_from(PUBLIC), min_size=0, max_size=3), st.sampled_from(REFUSED),
       st.lists(st.sampled_from(PUBLIC), min_size=0, max_size=3))
def test_one_refused_address_refuses_the_whole_answer(before: list[str], bad: tuple[str, str],
                                                       after: list[str]) -> None:
    verdict = decide("rebind.example", 443, [*before, bad[0], *after], ANY)
    assert not verdict.allowed and f"({bad[1]})" in verdict.reason


def test_a_private_rule_names_a_network_or_a_host() -> None:
    by_net = NetworkPolicy(("127.0.0.1", "db.internal"), ("127.0.0.1/32", "10.0.0.0/8"))
    assert decide("127.0.0.1", 8080, ["127.0.0.1"], by_net).allowed
    assert decide("db.internal", 5432, ["10.9.8.7"], by_net).allowed
    assert decide("db.internal", 5432, ["::ffff:10.9.8.7"], by_net).allowed  # the IPv4 inside is in the net
    assert not decide("db.internal", 5432, ["192.168.0.1"], by_net).allowed
    assert not decide("db.internal", 5432, ["127.0.0.2"], by_net).allowed
    by_host = NetworkPolicy(("*.corp.example",), ("*.corp.example",))
    assert decide("git.corp.example", 443, ["10.0.0.5", "fd00::5"], by_host).allowed
    assert not decide("git.corp.example", 443, ["0.0.0.0"], by_host).allowed  # unspecified: never
    assert not decide("git.corp.example", 443, ["224.0.0.1"], by_host).allowed  # multicast: never
    assert not decide("127.0.0.1", 80, ["0.0.0.0"], NetworkPolicy(("*",), ("0.0.0.0/0", "::/0"))).allowed


def test_names_outside_the_grant_are_refused_before_resolution() -> None:
    policy = NetworkPolicy(("example.com", "*.pypi.org"))
    assert check_name("example.com", 443, policy).allowed
    assert check_name("files.pypi.org", 443, policy).allowed
    for host in ("pypi.org", "www.example.com", "example.com.evil.net", "evilpypi.org", "x.pypi.org.evil"):
        verdict = check_name(host, 443, policy)
        assert not verdict.allowed and verdict.reason.startswith(f"{host} is not in the granted domains")
    assert decide("evil.net", 443, ["93.184.216.34"], policy).reason.startswith("evil.net is not in the granted")


@pytest.mark.parametrize("host", ["", " ", "a b", "exa mple.com", "evil.com/x", "user@host", "*.x", "h\0st",
                                  "[::1", "::1]"])
def test_what_is_not_a_host_name_is_refused(host: str) -> None:
    assert not decide(host, 443, ["93.184.216.34"], ANY).allowed


def test_ipv6_literals_are_never_named_by_a_domain_rule() -> None:
    for host in ("[::1]", "::1", "[2606:4700:4700::1111]", "[::ffff:127.0.0.1]"):
        assert normalise_host(host) is not None
        assert not check_name(host, 443, ANY).allowed


def test_an_ipv6_literal_has_one_spelling_on_every_python() -> None:
    # 3.13 prints an IPv4-mapped address dotted, 3.11 as hex: refusals and records name it one way
    for host in ("[::ffff:127.0.0.1]", "::FFFF:7F00:1", "[::ffff:7f00:1]"):
        assert normalise_host(host) == "::ffff:127.0.0.1"
    assert normalise_host("[2606:4700:4700:0::1111]") == "2606:4700:4700::1111"


@pytest.mark.parametrize("port", [0, -1, 65536, 10**6])
def test_ports_out_of_range_are_refused(port: int) -> None:
    assert "out of range" in decide("example.com", port, ["93.184.216.34"], ANY).reason


def test_case_and_trailing_dot_are_normalised() -> None:
    policy = NetworkPolicy(("Example.COM",))
    assert policy.domains == ("example.com",)
    assert decide("EXAMPLE.com.", 443, ["93.184.216.34"], policy).allowed


@pytest.mark.parametrize("domains,private", [(("exa mple.com",), ()), (("*.",), ()), (("a*.b",), ()),
                                             (("http://x",), ()), ((), ("not a net",)), ("example.com", ())])
def test_bad_policies_are_refused_at_construction(domains: tuple[str, ...], private: tuple[str, ...]) -> None:
    with pytest.raises(NetworkPolicyError):
        NetworkPolicy(domains, private)


def test_describe() -> None:
    assert ANY.describe() == "proxy(*)"
    assert NetworkPolicy(("a.com", "*.b.org"), ("127.0.0.1/32",)).describe() == \
        "proxy(a.com, *.b.org; private: 127.0.0.1/32)"
    assert NetworkPolicy(()).describe() == "proxy(no domains)"


LABEL = st.from_regex(r"[a-z0-9_]([a-z0-9_-]{0,6}[a-z0-9_])?", fullmatch=True)
HOSTS = st.lists(LABEL, min_size=1, max_size=4).map(".".join)
PATTERNS = st.one_of(st.just("*"), HOSTS, HOSTS.map(lambda h: "*." + h))


@given(HOSTS, PATTERNS)
def test_domain_matching_is_the_grants_webfetch_matching(host: str, pattern: str) -> None:
    rule = parse_rule(f"allow:WebFetch(domain:{pattern})", "session")
    request = Request(principal="p", tool="WebFetch", effect=Effect("network"), domains=(host,))
    grants_allow = grants_decide(request, [rule]).decision is Decision.ALLOW
    assert host_matches(host, pattern) == grants_allow
    assert check_name(host, 443, NetworkPolicy((pattern,))).allowed == grants_allow


@given(HOSTS, HOSTS)
def test_a_suffix_pattern_covers_subdomains_only(sub: str, base: str) -> None:
    assume(not base.startswith("*"))
    assert host_matches(f"{sub}.{base}", f"*.{base}")
    assert not host_matches(base, f"*.{base}")
    assert not host_matches(f"{base}.{sub}x", f"*.{base}")
