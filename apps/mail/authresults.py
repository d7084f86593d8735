"""Whether an inbound e-mail's sender is verified: DKIM or SPF passed for a domain aligned with
the From address's domain, as reported by someone we trust — the inbound provider (its own
fields or the headers it adds, apps/mail/webhooks.py) or, for IMAP, the `Authentication-Results`
header (RFC 8601) added by the channel's `trusted_authserv_id`.

Alignment is DMARC's relaxed kind without a public-suffix list: the two domains are equal, or
one is a subdomain of the other and the shorter has at least two labels (`shop.example` and
`mail.shop.example` align; `example` aligns with nothing). Everything here fails closed: a
header that cannot be read verifies nothing."""

from __future__ import annotations

import re
from collections.abc import Iterable
from email.message import Message
from email.utils import getaddresses

_COMMENT = re.compile(r"\([^()]*\)")
_PROPERTY = re.compile(r"([A-Za-z0-9_.-]+)\s*=\s*(\"[^\"]*\"|[^\s;]+)")


def address_domain(address: str | None) -> str:
    """The lower-cased domain of an address (`Name <a@b.example>`, `a@b.example`, or a bare
    domain); empty when there is none."""
    if not address:
        return ""
    pairs = getaddresses([address])
    value = (pairs[0][1] if pairs and pairs[0][1] else address).strip().strip("<>")
    domain = value.rsplit("@", 1)[-1] if "@" in value else value
    return domain.strip().strip(".").lower()


def from_domain(message: Message) -> str:
    """The domain of the single From address; empty when the header is missing or names
    several (a message "from" two people cannot be verified as either)."""
    values = message.get_all("From") or []
    if len(values) != 1:
        return ""
    pairs = [pair for pair in getaddresses([str(values[0])]) if pair[1]]
    if len(pairs) != 1:
        return ""
    return address_domain(pairs[0][1])


def domains_aligned(passed: str, author: str) -> bool:
    """Relaxed alignment of a domain that passed DKIM or SPF with the From domain."""
    passed, author = passed.lower().strip("."), author.lower().strip(".")
    if not passed or not author:
        return False
    if passed == author:
        return True
    shorter, longer = sorted((passed, author), key=len)
    return shorter.count(".") >= 1 and longer.endswith("." + shorter)


def _unquote(value: str) -> str:
    return value[1:-1] if len(value) >= 2 and value[0] == value[-1] == '"' else value


def parse_authentication_results(value: str) -> tuple[str, list[dict[str, str]]]:
    """(authserv-id, [{"method": "dkim", "result": "pass", "header.d": "…", …}, …]) of one
    `Authentication-Results` header value; comments are dropped."""
    text = " ".join(str(value).split())
    while True:  # nested comments: innermost first
        stripped = _COMMENT.sub(" ", text)
        if stripped == text:
            break
        text = stripped
    head, *resinfos = text.split(";")
    authserv_id = head.strip().split(" ")[0].strip().lower() if head.strip() else ""
    results: list[dict[str, str]] = []
    for resinfo in resinfos:
        pairs = _PROPERTY.findall(resinfo)
        if not pairs:
            continue  # "none"
        method, result = pairs[0]
        entry = {"method": method.lower(), "result": _unquote(result).lower()}
        for key, prop in pairs[1:]:
            entry[key.lower()] = _unquote(prop)
        results.append(entry)
    return authserv_id, results


def authentication_results_verified(message: Message, *, authserv_id: str) -> bool:
    """RFC 8601: the topmost `Authentication-Results` header whose authserv-id is the trusted
    one says dkim=pass with `header.d` aligned with From's domain, or spf=pass with
    `smtp.mailfrom` aligned. No trusted id, no such header, or no From domain → False.
    Headers from any other server (a sender can write anything below the receiver's own) are
    never read."""
    trusted = authserv_id.strip().lower()
    author = from_domain(message)
    if not trusted or not author:
        return False
    for value in message.get_all("Authentication-Results") or []:
        server, results = parse_authentication_results(str(value))
        if server != trusted:
            continue
        return results_verified(results, author=author)
    return False


def results_verified(results: Iterable[dict[str, str]], *, author: str) -> bool:
    """Whether parsed results hold a passing DKIM or SPF result aligned with `author`."""
    for entry in results:
        if entry.get("result") != "pass":
            continue
        if entry["method"] == "dkim" and domains_aligned(
            address_domain(entry.get("header.d") or entry.get("header.i")), author
        ):
            return True
        if entry["method"] == "spf" and domains_aligned(
            address_domain(entry.get("smtp.mailfrom")), author
        ):
            return True
    return False


def dkim_signing_domains(message: Message) -> list[str]:
    """The `d=` domain of every DKIM-Signature header (empty string for one without)."""
    domains = []
    for value in message.get_all("DKIM-Signature") or []:
        found = re.search(r"(?:^|;)\s*d\s*=\s*([^;\s]+)", " ".join(str(value).split()))
        domains.append(found.group(1).strip().lower() if found else "")
    return domains


def dkim_pass_aligned(message: Message) -> bool:
    """For a provider that reports only "DKIM passed" without naming the domain: the pass
    counts only when the message carries DKIM signatures and every one of them is by a domain
    aligned with From (so a valid signature of another domain cannot lend its pass)."""
    author = from_domain(message)
    domains = dkim_signing_domains(message)
    return bool(author and domains) and all(domains_aligned(d, author) for d in domains)
