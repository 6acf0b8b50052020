"""Push notices through ntfy, and a check that a topic is not easy to guess.

ntfy topics are public to anyone who knows the name, so a topic is a password: an empty topic
disables notices, and ``guessable_topic`` lets ``doctor`` warn about one that is short or made
of words. The controller decides *when* to send (and remembers what it sent); ``send`` only
delivers one notice, retrying transient failures, and should run as a background task.

May: POST to the configured ntfy server with the caller's ``httpx.AsyncClient``.
May not: print, decide when to notify, or put anything but the caller's title and message on
the wire (never secrets: callers pass slot names, states and zones, not keys or IPs they would
not publish).
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import httpx

from reconciler.errors import PermanentError, TemporaryError, UnsafeName

#: ntfy's own rule for topic names.
TOPIC_RE: Final = re.compile(r"^[-_A-Za-z0-9]{1,64}$")
_TAG_RE: Final = re.compile(r"^[-_a-z0-9+]{1,64}$")
_MAX_WAIT: Final = 60.0


def _url(server: str) -> str:
    try:
        url = httpx.URL(server)
    except (httpx.InvalidURL, TypeError) as e:
        raise PermanentError(f"invalid ntfy server {server!r}: {e}") from None
    if url.scheme not in {"http", "https"} or not url.host:
        raise PermanentError(f"invalid ntfy server {server!r}: expected an http(s) URL")
    return str(url).rstrip("/") + "/"


def _payload(
    topic: str, title: str, message: str, tags: Sequence[str], priority: int | None
) -> dict[str, Any]:
    if not TOPIC_RE.fullmatch(topic):
        raise UnsafeName(f"invalid ntfy topic {topic!r}: use up to 64 letters, digits, - or _")
    bad = [t for t in tags if not _TAG_RE.fullmatch(t)]
    if bad:
        raise UnsafeName(f"invalid ntfy tags {bad!r}")
    if priority is not None and not 1 <= priority <= 5:
        raise UnsafeName(f"invalid ntfy priority {priority!r}: expected 1-5")
    body: dict[str, Any] = {"topic": topic, "title": title, "message": message}
    if tags:
        body["tags"] = list(tags)
    if priority is not None:
        body["priority"] = priority
    return body


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return min(_MAX_WAIT, max(0.0, float(response.headers["retry-after"])))
    except (KeyError, ValueError):
        return None


async def send(
    client: httpx.AsyncClient,
    server: str,
    topic: str,
    *,
    title: str,
    message: str,
    tags: Sequence[str] = (),
    priority: int | None = None,
    retries: int = 3,
    backoff: float = 2.0,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> None:
    """Publish one notice (ntfy JSON publishing: POST to the server root). Empty topic: no-op.

    Transport errors, 429 and 5xx are tried again up to ``retries`` more times, waiting
    ``backoff * 2**n`` seconds (or the server's Retry-After, at most 60 s); then TemporaryError.
    Any other 4xx (a reserved topic, a bad request) raises PermanentError at once; an invalid
    topic, tag or priority raises UnsafeName before anything is sent.
    """
    if not topic:
        return
    url = _url(server)
    body = _payload(topic, title, message, tags, priority)
    attempts = max(0, retries) + 1
    problem = ""
    for attempt in range(attempts):
        wait = min(_MAX_WAIT, backoff * 2**attempt)
        try:
            response = await client.post(url, json=body)
        except httpx.TransportError as e:
            problem = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        else:
            if response.is_success:
                return
            problem = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
            if response.status_code != 429 and response.status_code < 500:
                raise PermanentError(f"ntfy refused the notice for topic {topic!r}: {problem}")
            wait = _retry_after(response) or wait
        if attempt + 1 < attempts:
            await sleep(wait)
    raise TemporaryError(
        f"ntfy at {url} failed after {attempts} attempts: {problem}", delay=_MAX_WAIT
    )


# --- topic strength ----------------------------------------------------------------------------

#: A topic needs at least this much estimated randomness in its random-looking parts (about
#: ten random letters and digits) not to be called guessable.
MIN_RANDOM_BITS: Final = 48.0
#: English letter frequencies (percent): words score above uniform letters, random runs below.
_ENGLISH: Final = dict(
    zip(
        "abcdefghijklmnopqrstuvwxyz",
        (8.2, 1.5, 2.8, 4.3, 12.7, 2.2, 2.0, 6.1, 7.0, 0.15, 0.77, 4.0, 2.4, 6.7, 7.5, 1.9, 0.095,
         6.0, 6.3, 9.1, 2.8, 0.98, 2.4, 0.15, 2.0, 0.074),
        strict=True,
    )
)  # fmt: skip


def _word_like(letters: str) -> bool:
    """Reads like English (or camelCase English): its letters are at least as likely under
    English letter frequencies as under uniformly random ones."""
    low = letters.lower()
    score = sum(math.log2(_ENGLISH[c] / 100 * 26) for c in low)
    return score >= 0


def _part_bits(part: str) -> float:
    runs = re.findall(r"[A-Za-z]+|[0-9]+", part)
    interleaved = len(runs) >= 4  # "k7f3x9": letters and digits drawn from an alphabet
    letter_bits = math.log2(52 if part.lower() != part and part.upper() != part else 26)
    bits = 0.0
    for run in runs:
        if run.isdigit():
            if interleaved or len(run) >= 6:  # a year or a count is not random
                bits += len(run) * math.log2(10)
        elif interleaved or (len(run) >= 5 and not _word_like(run)):
            bits += len(run) * letter_bits
    return bits


def topic_random_bits(topic: str) -> float:
    """Estimated bits of randomness in a topic, counting only parts that look random.

    Words, camelCase words and short numbers count nothing (they are what a guesser tries
    first); in a part that interleaves letters and digits every character counts; elsewhere a
    run of five or more letters that does not read like a word counts ~4.7 bits per letter and
    a run of six or more digits ~3.3 bits per digit. Deliberately strict: a false warning costs
    less than a readable topic.
    """
    return sum(_part_bits(part) for part in re.split(r"[-_]+", topic))


def guessable_topic(topic: str) -> str | None:
    """Why ``topic`` looks guessable, or None (also for "": notices are disabled then).

    For ``doctor``: a topic made of words and short numbers (``tpu-alerts``, ``my-tpus-2025``)
    is found by anyone trying names; a safe one carries a random part (24 hex digits always
    pass; a random part of 16 letters and digits passes about 99 times in 100).
    """
    if not topic:
        return None
    if not TOPIC_RE.fullmatch(topic):
        return f"ntfy topic {topic!r} is not a valid topic name (letters, digits, - and _)"
    bits = topic_random_bits(topic)
    if bits >= MIN_RANDOM_BITS:
        return None
    return (
        f"ntfy topic {topic!r} looks guessable (about {bits:.0f} bits of randomness; anyone "
        "who guesses it reads your notices): add a random part, e.g. tpu-<the output of "
        "`openssl rand -hex 12`>"
    )
