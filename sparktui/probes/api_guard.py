"""An OpenAI-compatible server is a stranger: what it sends is bounded, cleaned and scrubbed here.

- **Bounded reads.** A JSON body stops at ``MAX_BODY`` (1 MiB) and an SSE event (so each of its lines)
  at ``MAX_EVENT`` (1 MiB): past that the read ends with a one-line ``ServingError`` (kind
  ``too_large``).  ``read_body`` does it for aiohttp (``server_info``); ``http_client`` gives the
  openai client an HTTP client whose response hook wraps every body (error bodies included, and
  whatever transport or proxy it goes through) in a counting stream.  Only identity encoding is
  asked for, and a compressed body is refused: a cap on compressed bytes would not bound what they
  inflate to.
- **Server text** (a model id, ``finish_reason``, an error message, an answer) goes through the same
  sanitiser as a node's fields (``logs.sanitize``) and loses the caller's own API key (``scrub``),
  which servers echo in "Incorrect API key provided: ...".
- **Numbers** a server reports (token counts) are taken only when they are plain non-negative ints.

No Textual here.
"""

from __future__ import annotations

import sys
from typing import Any

from ..logs.redact import MASK
from ..logs.sanitize import clean_text, safe

MAX_BODY = 1 << 20  # a JSON body (/v1/models, a non-streamed answer, an error body)
MAX_EVENT = 1 << 20  # one SSE event, so one SSE line
MAX_TOKENS = 1 << 53  # a token count past this is not a count (and would overflow float arithmetic)


class ServingError(Exception):
    """One line: what failed and why (``status`` is the HTTP status when there was one)."""

    def __init__(self, message: str, status: int | None = None, kind: str = "error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


def too_large(what: str, limit: int) -> ServingError:
    return ServingError(f"{what} passed {limit >> 20} MiB: refused (a server does not send that much)",
                        kind="too_large")


# ------------------------------------------------------------------ server text

def scrub(text: str, secret: str | None) -> str:
    """``text`` without the caller's own key (a server echoes it back in its auth errors)."""
    if secret and len(secret) >= 4 and secret in text:
        return text.replace(secret, MASK)
    return text


def server_line(value: object, secret: str | None = None) -> str:
    """One field a server sent (a model id, ``finish_reason``, an error message) as one safe line."""
    return scrub(safe(value), secret).replace("\t", " ")  # a tab would shift the columns it is printed in


def server_text(value: object, secret: str | None = None) -> str:
    """A server's multi-line text (an answer) made terminal-safe; its newlines stay."""
    return scrub(clean_text(value if isinstance(value, str) else str(value)), secret)


def token_count(value: object) -> int | None:
    """A token count a server reported, or None when it is not one (a string, NaN, 10**400, -1)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS:
        return value
    return None


# ------------------------------------------------------------------ bounded reads

_BOUNDARIES = (b"\n\n", b"\r\r", b"\n\r\n")  # a blank line ends an SSE event (LF, CR or CRLF endings)


class ReadCap:
    """Counts what arrives and raises ``too_large`` past the limit: the whole body, or for an SSE
    stream the bytes since the last event boundary (a blank line)."""

    def __init__(self, what: str, *, sse: bool, limit: int | None = None) -> None:
        self.what, self.sse = what, sse
        self.limit = limit if limit is not None else (MAX_EVENT if sse else MAX_BODY)
        self.run = 0  # bytes counted against the limit
        self._tail = b""  # the last bytes of the previous chunk: a boundary may straddle two chunks

    def feed(self, chunk: bytes) -> None:
        if not self.sse:
            self.run += len(chunk)
        else:
            buf = self._tail + chunk
            ends = [i + len(sep) for sep in _BOUNDARIES if (i := buf.rfind(sep)) >= 0]
            self.run = len(buf) - max(ends) if ends else self.run + len(chunk)
            self._tail = buf[-3:]
        if self.run > self.limit:
            kind = "an SSE event" if self.sse else "the body"
            raise too_large(f"{self.what}: {kind}", self.limit)


async def read_body(resp: Any, what: str, limit: int = MAX_BODY) -> bytes:
    """An aiohttp response's body, at most ``limit`` bytes (a ``too_large`` ServingError past it)."""
    if resp.content_length is not None and resp.content_length > limit:
        raise too_large(f"{what}: the body", limit)
    cap = ReadCap(what, sse=False, limit=limit)
    parts = []
    async for chunk in resp.content.iter_any():
        cap.feed(chunk)
        parts.append(chunk)
    return b"".join(parts)


_STREAMS: dict[str, type] = {}


def _bounded_stream_class(mod: Any) -> type:
    """A byte stream of ``mod`` (httpx or httpx2: whichever the openai client is built on) that
    counts through a ``ReadCap``."""
    cls = _STREAMS.get(mod.__name__)
    if cls is None:
        class Bounded(mod.AsyncByteStream):
            def __init__(self, inner: Any, cap: ReadCap) -> None:
                self.inner, self.cap = inner, cap

            async def __aiter__(self):
                async for chunk in self.inner:
                    self.cap.feed(chunk)
                    yield chunk

            async def aclose(self) -> None:
                await self.inner.aclose()

        cls = _STREAMS[mod.__name__] = Bounded
    return cls


async def _identity_only(request: Any) -> None:
    request.headers["Accept-Encoding"] = "identity"


async def _bound_response(response: Any) -> None:
    what = f"{response.request.url.path}"
    enc = response.headers.get("content-encoding", "identity").strip().lower()
    if enc not in ("", "identity"):
        await response.aclose()
        raise ServingError(f"{what}: a compressed body (Content-Encoding {safe(enc)[:40]}) that was not asked for",
                           response.status_code, kind="malformed")
    sse = "text/event-stream" in response.headers.get("content-type", "")
    mod = sys.modules[type(response).__module__.split(".")[0]]
    response.stream = _bounded_stream_class(mod)(response.stream, ReadCap(what, sse=sse))


def http_client(**kw: Any) -> Any:
    """The openai client's own default HTTP client, every response body bounded (pass it as
    ``http_client=``; ``kw`` as for that client, e.g. ``timeout``)."""
    import openai

    hooks = kw.pop("event_hooks", {})
    kw["event_hooks"] = {"request": [*hooks.get("request", ()), _identity_only],
                         "response": [*hooks.get("response", ()), _bound_response]}
    return openai.DefaultAsyncHttpxClient(**kw)


def unwrap(exc: BaseException) -> ServingError | None:
    """The ServingError a bounded read raised, when the openai client wrapped it (in an
    APIConnectionError: a body read inside its ``send``)."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, ServingError):
            return exc
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return None
