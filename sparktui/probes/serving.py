"""What an OpenAI-compatible server (vLLM) says about itself, and one chat through the openai client.

``endpoint`` gives the base URL on the operator's machine for a serve port as the NODE sees it (a
local port forward on the node's SSH connection, or the address itself on a local node).
``server_info`` reads ``/health``, ``/version`` and ``/v1/models``; ``chat`` sends one chat
completion, streamed or not, and reads the answer's reasoning from ``reasoning`` (vLLM >= 0.17)
or ``reasoning_content`` (older servers) apart from its content.  Both read the server as a stranger
(``api_guard``): bodies and SSE events are bounded, ``timeout`` bounds the whole exchange, and every
string the server sends is cleaned and loses the caller's key before anything shows or keeps it
(``ServingError`` messages included).  No Textual here.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from ..nodes.base import Node, NodeError
from .api_guard import (MAX_BODY, ServingError, http_client, read_body, scrub, server_line, server_text,  # noqa: F401
                        token_count, unwrap)


@dataclass(frozen=True)
class ServerInfo:
    base_url: str
    healthy: bool
    version: str = ""
    models: tuple[str, ...] = ()


RATE_MIN_TOKENS = 16  # generated tokens below which a tok/s figure is noise


@dataclass(frozen=True)
class ChatAnswer:
    model: str
    content: str | None
    reasoning: str | None
    finish_reason: str | None
    ttft_s: float | None = None
    total_s: float = 0.0
    tokens_per_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    tool_calls: tuple[dict, ...] = field(default_factory=tuple)

    @property
    def shown_rate(self) -> float | None:
        """tok/s worth printing: from RATE_MIN_TOKENS generated tokens up (a 5-token answer's rate is
        mostly the first token's latency).  The JSON keeps the measured ``tokens_per_s``."""
        if self.tokens_per_s is None or (self.completion_tokens or 0) < RATE_MIN_TOKENS:
            return None
        return self.tokens_per_s

    def to_json(self) -> dict:
        d = asdict(self)
        d["tool_calls"] = list(self.tool_calls)
        return d


async def endpoint(node: Node, host: str, port: int) -> str:
    """``http://ADDR:PORT`` reaching host:port as ``node`` sees it."""
    target = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    try:  # a backend that cannot reach it raises NotSupported (a NodeError) with the same words
        addr, lport = await node.local_port(target, port)
    except NodeError as exc:
        raise ServingError(str(exc), kind="unreachable") from None
    return f"http://{addr}:{lport}"


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def parse_models(body: bytes, what: str = "/v1/models") -> tuple[str, ...]:
    """The model ids of a ``/v1/models`` body, each one safe line; ServingError (one line) when the
    body is not that list."""
    try:
        obj = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the parser's depth
        raise ServingError(f"{what}: not JSON", kind="malformed") from None
    data = obj.get("data") if isinstance(obj, dict) else None
    if not isinstance(data, list):
        raise ServingError(f"{what}: no 'data' list of models", kind="malformed")
    ids = (server_line(m["id"]) for m in data if isinstance(m, dict) and isinstance(m.get("id"), str))
    return tuple(i for i in ids if i.strip())  # an id that is blank once cleaned names nothing to ask for


async def server_info(base_url: str, *, api_key: str | None = None, timeout: float = 10.0) -> ServerInfo:
    """/health, /version and /v1/models within ``timeout`` seconds in all."""
    try:
        async with asyncio.timeout(timeout):
            return await _server_info(base_url, api_key, timeout)
    except TimeoutError:
        raise ServingError(f"{base_url}: no complete answer within {timeout:g} s (timeout)", kind="timeout") from None


async def _server_info(base_url: str, api_key: str | None, timeout: float) -> ServerInfo:
    import aiohttp

    headers = {"Accept-Encoding": "identity"}  # and nothing inflated: the bounds count what is read
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    to = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(base_url=base_url, timeout=to, headers=headers, auto_decompress=False) as http:
        try:
            async with http.get("/health") as r:
                healthy = r.status == 200
        except (aiohttp.ClientError, TimeoutError) as exc:
            msg = server_line(f"{base_url}/health: {_short(exc) or type(exc).__name__}", api_key)
            raise ServingError(msg, kind="unreachable") from None
        version, models = "", ()
        try:
            async with http.get("/version") as r:
                if r.status == 200:
                    version = server_line(json.loads(await read_body(r, "/version")).get("version", ""))
        except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError, RecursionError):
            pass  # optional: an older server, or a proxy in front
        try:
            async with http.get("/v1/models") as r:
                if r.status == 401:
                    raise ServingError(f"{base_url}/v1/models: 401 Unauthorized (wrong or missing API key)", 401,
                                       kind="auth")
                if r.status == 200:
                    models = parse_models(await read_body(r, "/v1/models"), f"{base_url}/v1/models")
        except (aiohttp.ClientError, TimeoutError):
            pass
    return ServerInfo(base_url, healthy, version, models)


def _reasoning_of(obj: Any) -> str | None:
    """``reasoning`` (vLLM >= 0.17) or ``reasoning_content`` (older servers), whichever is set."""
    for name in ("reasoning", "reasoning_content"):
        v = getattr(obj, name, None)
        if v is None and getattr(obj, "model_extra", None):
            v = obj.model_extra.get(name)
        if v:
            return v
    return None


def _usage(usage: Any) -> tuple[int | None, int | None, int | None]:
    if usage is None:
        return None, None, None
    details = getattr(usage, "completion_tokens_details", None)
    return (token_count(getattr(usage, "prompt_tokens", None)), token_count(getattr(usage, "completion_tokens", None)),
            token_count(getattr(details, "reasoning_tokens", None)))


def _piece(value: Any) -> str | None:
    """A streamed piece of text; anything else is a broken protocol (a ValueError, said as malformed)."""
    if value is None or isinstance(value, str):
        return value or None
    raise ValueError(f"a delta that is not text ({type(value).__name__})")


# (kind, text) as a streamed answer arrives: kind is "reasoning", "content" or "tool"
OnDelta = Callable[[str, str], None]
MAX_ANSWER = 16 << 20  # characters of one answer kept (content, reasoning and tool calls together)


def deadline_error(timeout: float, stream: bool) -> ServingError:
    """The one line for an answer that did not end within ``timeout`` seconds."""
    what = "the stream stalled or dripped: no complete answer" if stream else "no answer"
    return ServingError(f"{what} within {timeout:g} s (timeout)", kind="timeout")


async def chat(base_url: str, model: str, prompt: str, *, api_key: str | None = None, max_tokens: int | None = 64,
               thinking: bool | None = None, stream: bool = False, timeout: float = 120.0,
               temperature: float = 0.0, tools: list[dict] | None = None,
               on_delta: OnDelta | None = None) -> ChatAnswer:
    """One chat completion.  ``thinking`` sets ``chat_template_kwargs.enable_thinking`` (None: the
    server's default).  ``timeout`` bounds the whole exchange (and so each wait for bytes: a stream
    that stalls, drips or only pings ends too).  ``on_delta`` sees each streamed piece (without the
    key; the faces clean it for the terminal); ``max_tokens=None`` leaves the limit to the server.
    Raises ServingError with the API's status and message, one safe line."""
    try:
        async with asyncio.timeout(timeout):
            return await _chat(base_url, model, prompt, api_key, max_tokens, thinking, stream, timeout, temperature,
                               tools, on_delta)
    except TimeoutError:
        raise deadline_error(timeout, stream) from None
    except ServingError as exc:  # one safe line without the key, whoever raised it
        raise ServingError(server_line(str(exc), api_key), exc.status, exc.kind) from None


async def _chat(base_url: str, model: str, prompt: str, api_key: str | None, max_tokens: int | None,
                thinking: bool | None, stream: bool, timeout: float, temperature: float,
                tools: list[dict] | None, on_delta: OnDelta | None) -> ChatAnswer:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url.rstrip("/") + "/v1", api_key=api_key or "EMPTY",
                                timeout=timeout, max_retries=0, http_client=http_client(timeout=timeout))
    extra: dict = {}
    if thinking is not None:
        extra["chat_template_kwargs"] = {"enable_thinking": thinking}
    kw = dict(model=model, messages=[{"role": "user", "content": prompt}], temperature=temperature,
              extra_body=extra or None)
    if max_tokens is not None:  # None: the server's own limit (what is left of max_model_len)
        kw["max_tokens"] = max_tokens
    if tools:
        kw["tools"] = tools
    key = api_key

    def answer(got_model, content, reasoning, finish, first, total, rate, usage, calls) -> ChatAnswer:
        # every string the server sent, cleaned and without the key, before any face or file sees it
        p, c, r = _usage(usage)
        calls = tuple({**tc, "id": server_line(tc.get("id"), key),
                       "function": {"name": server_line((tc.get("function") or {}).get("name"), key),
                                    "arguments": server_text((tc.get("function") or {}).get("arguments") or "", key)}}
                      for tc in calls)
        return ChatAnswer(server_line(got_model, key), server_text(content, key) if content is not None else None,
                          server_text(reasoning, key) if reasoning is not None else None,
                          server_line(finish, key) if finish is not None else None, first, total,
                          rate(c) if c else None, p, c, r, calls)

    t0 = time.monotonic()
    try:
        if not stream:
            resp = await client.chat.completions.create(**kw)
            total = time.monotonic() - t0
            choice = resp.choices[0]
            calls = tuple(tc.model_dump() for tc in (choice.message.tool_calls or ()))
            return answer(resp.model, _piece(choice.message.content), _piece(_reasoning_of(choice.message)),
                          choice.finish_reason, None, total, lambda c: c / total if total > 0 else None,
                          resp.usage, calls)
        content: list[str] = []
        reasoning: list[str] = []
        finish, first, usage, got_model, size = None, None, None, model, 0
        calls: dict[int, dict] = {}
        async with await client.chat.completions.create(**kw, stream=True,
                                                        stream_options={"include_usage": True}) as events:
            async for chunk in events:
                got_model = chunk.model or got_model
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    delta = choice.delta
                    piece_r, piece_c = _piece(_reasoning_of(delta)), _piece(delta.content)
                    if (piece_c or piece_r) and first is None:
                        first = time.monotonic() - t0
                    for kind, piece, into in (("reasoning", piece_r, reasoning), ("content", piece_c, content)):
                        if piece:
                            into.append(piece)
                            size += len(piece)
                            if on_delta:
                                on_delta(kind, scrub(piece, key))
                    for tc in delta.tool_calls or ():
                        cur = calls.setdefault(tc.index, {"id": tc.id, "type": "function",
                                                          "function": {"name": "", "arguments": ""}})
                        if tc.function is not None:
                            name, args = _piece(tc.function.name) or "", _piece(tc.function.arguments) or ""
                            cur["function"]["name"] += name
                            cur["function"]["arguments"] += args
                            size += len(name) + len(args)
                            if on_delta:
                                on_delta("tool", scrub(name + args, key))
                    if choice.finish_reason:
                        finish = choice.finish_reason
                    if size > MAX_ANSWER:
                        raise ServingError(f"the answer passed {MAX_ANSWER >> 20} MiB: refused", kind="too_large")
        total = time.monotonic() - t0
        gen = total - (first or 0.0)
        return answer(got_model, "".join(content) or None, "".join(reasoning) or None, finish, first, total,
                      lambda c: c / gen if gen > 0 else None, usage, [calls[i] for i in sorted(calls)])
    except openai.APIStatusError as exc:
        msg = _api_message(exc)
        raise ServingError(f"{exc.status_code}: {msg}", exc.status_code, kind=f"http_{exc.status_code}") from None
    except openai.APITimeoutError:
        what = "the stream stalled: no data" if stream else "no answer"
        raise ServingError(f"{what} for {timeout:g} s (timeout)", kind="timeout") from None
    except openai.APIConnectionError as exc:
        if (inner := unwrap(exc)) is not None:  # a bounded read, wrapped by the client's send
            raise inner from None
        raise ServingError(f"cannot connect to {base_url}: {_short(exc.__cause__ or exc)}", kind="connection") from None
    except openai.APIError as exc:
        raise ServingError(f"API error: {_short(exc)}", kind="api") from None
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError) as exc:
        # a chunk that is not JSON, or JSON of another shape: the server (or a proxy) broke the protocol
        raise ServingError(f"malformed answer from {base_url}: {type(exc).__name__}: {_short(exc)}",
                           kind="malformed") from None
    finally:
        await client.close()


def _api_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return (str(err["message"]).splitlines() or [""])[0][:300]
        if isinstance(body.get("message"), str):
            return (body["message"].splitlines() or [""])[0][:300]
    return _short(exc)
