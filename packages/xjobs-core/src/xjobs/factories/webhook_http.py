"""One webhook request over httpx (`xjobs-core[webhook]`, imported lazily): the POST to the address checked, its bounded raw excerpt, and what its answer means."""

from __future__ import annotations

import asyncio
import email.utils
import time
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Final

from xjobs.contract.webhooks import MAX_EXCERPT_CHARS, WebhookStatus
from xjobs.errors import ExtraMissingError, XJobsError
from xjobs.factories.webhook_address import DEFAULT_PORTS, pin
from xjobs.factories.webhook_errors import (
    WebhookAddressRefusedError,
    WebhookFailedError,
    WebhookRejectedError,
)

if TYPE_CHECKING:
    import httpx

# A receiver's Retry-After is honoured up to this long (a longer one waits this long).
MAX_RETRY_AFTER_MS: Final = 24 * 3_600_000
# 408 (request timeout) and 429 (too many requests) are the 4xx answers a retry can cure.
RETRYABLE_4XX: Final = frozenset({408, 429})
USER_AGENT: Final = "xjobs-webhook/1"
# The only Content-Encoding read: the request asks for `identity` and nothing is ever decoded.
IDENTITY: Final = frozenset({"", "identity"})
# The most of an answer's body ever read: bytes enough for the excerpt's characters of UTF-8.
MAX_EXCERPT_BYTES: Final = MAX_EXCERPT_CHARS * 4


@dataclass(frozen=True, slots=True)
class Answer:
    """What one request came to: the ledger's status, the HTTP status (`None`: no answer), the
    latency, the start of the response body, and the error the attempt raises (`None`: delivered)."""

    status: WebhookStatus
    http_status: int | None
    latency_ms: int
    excerpt: str
    error: XJobsError | None


def httpx_module() -> ModuleType:
    """`httpx`, or `ExtraMissingError` naming the extra that installs it."""
    try:
        import httpx
    except ImportError as exc:
        raise ExtraMissingError(
            "webhook() sends with httpx, which is not installed: pip install 'xjobs-core[webhook]'"
        ) from exc
    return httpx


def retry_after_ms(value: str | None, now_s: float) -> int | None:
    """A `Retry-After` header (delay-seconds or an HTTP-date) as a wait in ms, bounded; `None` when
    absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        seconds = float(text)
    else:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            return None
        seconds = when.timestamp() - now_s
    return min(max(int(seconds * 1000), 0), MAX_RETRY_AFTER_MS)


def judge(http_status: int, retry_after: str | None, latency_ms: int, excerpt: str) -> Answer:
    """A 2xx is delivered; a redirect is refused (never followed); 408, 429 and 5xx are retried,
    at least `Retry-After` later; any other 4xx is rejected for good."""
    said = f"the endpoint answered {http_status}"
    if 200 <= http_status < 300:
        return Answer("delivered", http_status, latency_ms, excerpt, None)
    if 300 <= http_status < 400:
        error: XJobsError = WebhookRejectedError(f"{said}, a redirect: webhooks never follow one")
        return Answer("rejected", http_status, latency_ms, excerpt, error)
    if http_status in RETRYABLE_4XX or http_status >= 500:
        wait = retry_after_ms(retry_after, time.time())
        error = WebhookFailedError(said, retry_after_ms=wait)
        return Answer("failed", http_status, latency_ms, excerpt, error)
    return Answer("rejected", http_status, latency_ms, excerpt, WebhookRejectedError(said))


async def _excerpt(response: httpx.Response) -> str:
    """The start of the body as sent, read no further than the excerpt needs and never decoded:
    an answer in any `Content-Encoding` but identity is not read at all (a few hundred bytes of
    stacked gzip inflate to gigabytes in one call)."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in IDENTITY:
        return f"[not read: Content-Encoding {encoding!r:.80}]"
    limit = MAX_EXCERPT_BYTES
    read = bytearray()
    async for chunk in response.aiter_raw():
        read += chunk[: limit - len(read)]
        if len(read) >= limit:
            break
    return bytes(read).decode("utf-8", "replace")[:MAX_EXCERPT_CHARS]


async def post(
    url: str, headers: dict[str, str], body: bytes, timeout_s: float, *, allow_private: bool
) -> Answer:
    """POST `body` to `url`, the whole exchange (the host's resolution included) bounded by
    `timeout_s`. The host is resolved for this attempt and the request dials the address that was
    checked (no second lookup), sending the URL's own Host and TLS server name; an address a
    webhook may not dial answers a `skipped` attempt, nothing sent. A cancellation of the caller
    passes through (the attempt is then not an answer at all)."""
    httpx = httpx_module()
    started = time.monotonic()
    try:
        target = httpx.URL(url)
    except httpx.InvalidURL as exc:  # e.g. a dotted address httpx reads otherwise than a resolver
        unread = WebhookAddressRefusedError(f"the endpoint's url cannot be dialled: {exc}")
        return Answer("skipped", None, 0, "", unread)
    host = target.raw_host.decode("ascii")
    sent = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        "accept-encoding": "identity",
        **headers,
        "host": target.netloc.decode("ascii"),
    }
    # the TLS server name (and the certificate's check) is the URL's host, not the address dialled
    extensions = {"sni_hostname": host} if target.scheme == "https" else {}
    try:
        async with asyncio.timeout(timeout_s):
            port = target.port or DEFAULT_PORTS[target.scheme]
            pinned = await pin(host, port, allow_private=allow_private)
            async with (
                # environment proxies are not read: a forward proxy would resolve the name again
                httpx.AsyncClient(follow_redirects=False, timeout=timeout_s, trust_env=False) as c,
                c.stream(
                    "POST",
                    target.copy_with(host=str(pinned.address)),
                    headers=sent,
                    content=body,
                    extensions=extensions,
                ) as response,
            ):
                excerpt = await _excerpt(response)
    except WebhookAddressRefusedError as refused:
        return Answer("skipped", None, _since(started), "", refused)
    except WebhookFailedError as unresolved:
        return Answer("failed", None, _since(started), "", unresolved)
    except (TimeoutError, httpx.TimeoutException):
        failure = WebhookFailedError(f"the endpoint did not answer within {timeout_s:g} s")
        return Answer("failed", None, _since(started), "", failure)
    except httpx.HTTPError as exc:
        failure = WebhookFailedError(f"the request failed: {type(exc).__name__}: {exc}")
        return Answer("failed", None, _since(started), "", failure)
    latency = _since(started)
    return judge(response.status_code, response.headers.get("retry-after"), latency, excerpt)


def _since(started: float) -> int:
    return max(int((time.monotonic() - started) * 1000), 0)
