"""DRF's `SimpleRateThrottle`, kept in one round trip when the cache is Redis.

DRF keeps a bucket's history as a pickled list of timestamps in the cache: a GET and a SET per
check, both carrying the whole list (a tenant-wide bucket at 3,000/min holds up to 3,000
floats). Every widget request runs one to three such checks, which made throttling one of the
web process's largest CPU costs under load (docs/benchmarks.md). With Redis as the cache the
same sliding window lives in a sorted set instead, checked and updated by one Lua script: one
round trip, nothing pickled, and atomic (two web processes can no longer both take the last
slot). Without Redis (the demo, most tests: the local-memory cache) DRF's own code runs.

Semantics are DRF's: a request is allowed while fewer than `num_requests` were allowed in the
last `duration` seconds; refused ones are not recorded; `wait()` answers as DRF's does. If
Redis cannot be reached the request is allowed (and logged): a throttle must not take the
widget down with it."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from rest_framework.request import Request
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle
from rest_framework.views import APIView

from apps.platform.redis_pool import REDIS_CACHE_BACKEND

logger = logging.getLogger(__name__)


# KEYS[1]: the bucket; ARGV: now (s), duration (s), limit, a unique member.
# Returns {allowed 0/1, requests in the window (including this one if allowed), oldest (s)}.
_SLIDING_WINDOW = """
local now = tonumber(ARGV[1])
local duration = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - duration)
local count = redis.call('ZCARD', KEYS[1])
if count >= tonumber(ARGV[3]) then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  return {0, count, oldest[2] or ARGV[1]}
end
redis.call('ZADD', KEYS[1], now, ARGV[4])
redis.call('PEXPIRE', KEYS[1], math.ceil(duration * 1000))
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {1, count + 1, oldest[2]}
"""

_lock = threading.Lock()
_script: tuple[str, Any] | None = None  # (the cache's location, the registered script)


def _redis_script() -> Any | None:
    """The sliding-window script on the cache's Redis (one client per process, shared by its
    threads), or None when the cache is not Redis."""
    global _script
    config = settings.CACHES.get("default", {})
    if config.get("BACKEND") != REDIS_CACHE_BACKEND:
        return None
    location = config.get("LOCATION")
    if isinstance(location, list | tuple):
        location = location[0]  # the primary: writes go there
    location = str(location)
    with _lock:
        if _script is None or _script[0] != location:
            import redis

            client = redis.Redis.from_url(location, socket_timeout=2, socket_connect_timeout=2)
            _script = (location, client.register_script(_SLIDING_WINDOW))
        return _script[1]


class SlidingWindowThrottle(SimpleRateThrottle):
    """`SimpleRateThrottle` in one atomic Redis round trip when the cache is Redis."""

    _window: tuple[int, float] | None = None  # (requests in the window, the oldest's time)
    num_requests: int  # (set by SimpleRateThrottle.__init__ from the rate; untyped there)
    duration: int

    def allow_request(self, request: Request, view: APIView) -> bool:
        script = _redis_script() if self.rate is not None else None
        if script is None:
            self._window = None
            return super().allow_request(request, view)
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        try:
            allowed, count, oldest = script(
                keys=[cache.make_key(self.key)],
                args=[repr(self.now), self.duration, self.num_requests, secrets.token_hex(8)],
            )
        except Exception:  # Redis unreachable: let the request through rather than fail it
            logger.warning("throttle: Redis unreachable, request allowed", exc_info=True)
            self._window = (0, self.now)
            return True
        self._window = (int(count), float(oldest))
        return bool(allowed)

    def wait(self) -> float | None:
        """DRF's answer, from the window the script returned."""
        if self._window is None:
            return super().wait()
        count, oldest = self._window
        remaining = self.duration - (self.now - oldest) if count else self.duration
        available = self.num_requests - count + 1
        if available <= 0:
            return None
        return remaining / float(available)


# ---------------------------------------------------------------------------------------------
# Visitors and their token window
# ---------------------------------------------------------------------------------------------


def visitor_key(address: str) -> str:
    """A visitor's key from their client address (the throttles' ident): a keyed hash, so no
    address is stored. IPv6 counts per /64 — one subscriber's prefix — so a visitor cannot
    pick a new bucket per request; "" for no address."""
    address = (address or "").strip()
    if not address:
        return ""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        normalized = address.lower()
    else:
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if isinstance(ip, ipaddress.IPv6Address):
            normalized = str(ipaddress.ip_network(f"{ip}/64", strict=False))
        else:
            normalized = str(ip)
    digest = hmac.new(
        settings.SECRET_KEY.encode(), f"visitor:{normalized}".encode(), hashlib.sha256
    )
    return digest.hexdigest()[:32]


# Two token windows (docs/widget.md "Limits and throttles"): one per conversation — a widget
# session: its id travels with the visitor token, so it is one customer's, not one address's —
# and a much larger ceiling per client address (`visitor_key`), which bounds what anyone can
# spend by starting new conversations. One office or carrier address is then many customers,
# each with their own window, not one.
TOKEN_WINDOW_SCOPE = "widget_tokens"  # noqa: S105 (a throttle scope)
ADDRESS_TOKEN_WINDOW_SCOPE = "widget_address_tokens"  # noqa: S105 (a throttle scope)
CONVERSATION_WINDOW = "conversation"
ADDRESS_WINDOW = "address"

# KEYS: the windows; ARGV: now (s), a member prefix, then per window: duration (s), tokens to
# add (0: only read). Returns per window its entries as {member, score, …}; a member is
# "<random>:<n>:<tokens>". One round trip for both windows.
_USAGE_WINDOW = """
local now = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local duration = tonumber(ARGV[1 + 2 * i])
  local add = tonumber(ARGV[2 + 2 * i])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - duration)
  if add > 0 then
    redis.call('ZADD', key, now, ARGV[2] .. ':' .. i .. ':' .. add)
    redis.call('PEXPIRE', key, math.ceil(duration * 1000))
  end
  out[i] = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
end
return out
"""
_token_script: tuple[str, Any] | None = None
_local_lock = threading.Lock()  # the local-memory cache's read-modify-write (demo, tests)


def _redis_token_script() -> Any | None:
    """The token-window script on the cache's Redis (on the sliding window's client), or None
    when the cache is not Redis."""
    global _token_script
    script = _redis_script()
    if script is None:
        return None
    with _lock:
        location = _script[0] if _script is not None else ""
        if _token_script is None or _token_script[0] != location:
            _token_script = (location, script.registered_client.register_script(_USAGE_WINDOW))
        return _token_script[1]


def token_window_rate(scope: str = TOKEN_WINDOW_SCOPE) -> tuple[int, int] | None:
    """(tokens, seconds) of a token window — `widget_tokens` (`THROTTLE_WIDGET_TOKENS`, per
    conversation) or `widget_address_tokens` (`THROTTLE_WIDGET_ADDRESS_TOKENS`, per client
    address) — or None when it is off."""
    rates = api_settings.DEFAULT_THROTTLE_RATES or {}
    rate = rates.get(scope)
    if not rate:
        return None
    num, period = str(rate).split("/")
    seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400}[period[0]]
    return int(num), seconds


def token_window_key(*, client_id: int, conversation_id: int) -> str:
    """A conversation's window (conversations belong to one client)."""
    return f"throttle_{TOKEN_WINDOW_SCOPE}_{client_id}_c{conversation_id}"


def address_token_window_key(*, client_id: int, visitor: str) -> str:
    """One window per address and client: what an address spent on one tenant's widget never
    holds it back on another's."""
    return f"throttle_{ADDRESS_TOKEN_WINDOW_SCOPE}_{client_id}_{visitor}"


@dataclass(frozen=True)
class TokenWindowReached:
    """A window a new message found at or over its rate: which one, its rate, what the turns
    in it used, and the seconds until enough of that has aged out."""

    window: str  # CONVERSATION_WINDOW | ADDRESS_WINDOW
    limit: int
    seconds: int
    used: int
    wait: float

    def as_data(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "limit": self.limit,
            "seconds": self.seconds,
            "used": self.used,
            "wait": round(self.wait),
        }


def _windows(
    *, client_id: int, conversation_id: int | None, visitor: str
) -> list[tuple[str, str, tuple[int, int]]]:
    """(name, key, rate) of the windows that apply and are on."""
    found = []
    rate = token_window_rate(TOKEN_WINDOW_SCOPE)
    if rate is not None and conversation_id:
        key = token_window_key(client_id=client_id, conversation_id=conversation_id)
        found.append((CONVERSATION_WINDOW, key, rate))
    rate = token_window_rate(ADDRESS_TOKEN_WINDOW_SCOPE)
    if rate is not None and visitor:
        key = address_token_window_key(client_id=client_id, visitor=visitor)
        found.append((ADDRESS_WINDOW, key, rate))
    return found


def _token_windows(
    windows: list[tuple[str, int, int]],
) -> list[list[tuple[float, int]]]:
    """For each (key, duration, add): trim the window to the last `duration` seconds, add `add`
    tokens now, and return its entries (time, tokens), oldest first."""
    now = time.time()
    script = _redis_token_script()
    if script is not None:
        args: list[Any] = [repr(now), secrets.token_hex(8)]
        for _key, duration, add in windows:
            args += [duration, int(add)]
        raw = script(keys=[cache.make_key(key) for key, _d, _a in windows], args=args)
        return [
            [
                (float(score), int(member.decode().rsplit(":", 1)[1]))
                for member, score in zip(entries[0::2], entries[1::2], strict=True)
            ]
            for entries in raw
        ]
    found = []
    with _local_lock:
        for key, duration, add in windows:
            entries = [e for e in cache.get(key, []) if e[0] > now - duration]
            if add > 0:
                entries.append((now, int(add)))
                cache.set(key, entries, duration)
            found.append(entries)
    return found


def token_window_charge(
    *, client_id: int, conversation_id: int | None, visitor: str, tokens: int
) -> None:
    """Count `tokens` a turn used in its conversation's and its address's windows. Never
    raises: a window that cannot be written must not fail the turn (it is logged)."""
    if tokens <= 0:
        return
    windows = _windows(client_id=client_id, conversation_id=conversation_id, visitor=visitor)
    if not windows:
        return
    try:
        _token_windows([(key, rate[1], tokens) for _name, key, rate in windows])
    except Exception:
        logger.warning("token window: could not charge a turn", exc_info=True)


def token_window_reached(
    *, client_id: int, conversation_id: int | None, visitor: str
) -> TokenWindowReached | None:
    """The window a new message of this conversation and address finds at or over its rate
    (the conversation's first), or None while both are under it. A turn admitted under a rate
    may take its windows past it; they stay reached until enough of their tokens have aged
    out. If the cache cannot be read, None (and it is logged)."""
    windows = _windows(client_id=client_id, conversation_id=conversation_id, visitor=visitor)
    if not windows:
        return None
    try:
        found = _token_windows([(key, rate[1], 0) for _name, key, rate in windows])
    except Exception:
        logger.warning("token window: cache unreachable, message let through", exc_info=True)
        return None
    now = time.time()
    for (name, _key, (limit, duration)), entries in zip(windows, found, strict=True):
        total = used = sum(tokens for _, tokens in entries)
        if total < limit:
            continue
        wait = float(duration)
        for at, tokens in entries:  # oldest first: when has enough aged out?
            total -= tokens
            if total < limit:
                wait = max(1.0, at + duration - now)
                break
        return TokenWindowReached(window=name, limit=limit, seconds=duration, used=used, wait=wait)
    return None
