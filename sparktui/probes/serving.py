"""What an OpenAI-compatible server (vLLM) says about itself, and one chat through the openai client.

``endpoint`` gives the base URL on the operator's machine for a serve port as the NODE sees it (a
local port forward on the node's SSH connection, or the address itself on a local node).
``server_info`` reads ``/health``, ``/version`` and ``/v1/models``; ``chat`` sends one chat
completion, streamed or not, and reads the answer's reasoning from ``reasoning`` (vLLM >= 0.17)
or ``reasoning_content`` (older servers) apart from its content.  No Textual here.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from ..nodes.base import Node, NodeError


class ServingError(Exception):
    """One line: what failed and why (``status`` is the HTTP status when there was one)."""

    def __init__(self, message: str, status: int | None = None, kind: str = "error") -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


@dataclass(frozen=True)
class ServerInfo:
    base_url: str
    healthy: bool
    version: str = ""
    models: tuple[str, ...] = ()


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

    def to_json(self) -> dict:
        d = asdict(self)
        d["tool_calls"] = list(self.tool_calls)
        return d


async def endpoint(node: Node, host: str, port: int) -> str:
    """``http://ADDR:PORT`` reaching host:port as ``node`` sees it."""
    target = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    local_port = getattr(node, "local_port", None)
    if local_port is None:
        raise ServingError(f"{node.name}: this node backend cannot reach its serve port", kind="unreachable")
    try:
        addr, lport = await local_port(target, port)
    except NodeError as exc:
        raise ServingError(str(exc), kind="unreachable") from None
    return f"http://{addr}:{lport}"


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


async def server_info(base_url: str, *, api_key: str | None = None, timeout: float = 10.0) -> ServerInfo:
    import aiohttp

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    to = aiohttp.ClientTimeout(total=timeout)
    async with aiohttp.ClientSession(base_url=base_url, timeout=to, headers=headers) as http:
        try:
            async with http.get("/health") as r:
                healthy = r.status == 200
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ServingError(f"{base_url}/health: {_short(exc) or type(exc).__name__}", kind="unreachable") from None
        version, models = "", ()
        try:
            async with http.get("/version") as r:
                if r.status == 200:
                    version = str((await r.json(content_type=None)).get("version", ""))
        except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError):
            pass
        try:
            async with http.get("/v1/models") as r:
                if r.status == 401:
                    raise ServingError(f"{base_url}/v1/models: 401 Unauthorized (wrong or missing API key)", 401,
                                       kind="auth")
                if r.status == 200:
                    data = (await r.json(content_type=None)).get("data", [])
                    models = tuple(str(m.get("id")) for m in data if isinstance(m, dict))
        except (aiohttp.ClientError, TimeoutError, ValueError, AttributeError):
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
    return usage.prompt_tokens, usage.completion_tokens, getattr(details, "reasoning_tokens", None)


# (kind, text) as a streamed answer arrives: kind is "reasoning", "content" or "tool"
OnDelta = Callable[[str, str], None]


async def chat(base_url: str, model: str, prompt: str, *, api_key: str | None = None, max_tokens: int | None = 64,
               thinking: bool | None = None, stream: bool = False, timeout: float = 120.0,
               temperature: float = 0.0, tools: list[dict] | None = None,
               on_delta: OnDelta | None = None) -> ChatAnswer:
    """One chat completion.  ``thinking`` sets ``chat_template_kwargs.enable_thinking`` (None: the
    server's default).  ``timeout`` bounds each wait for bytes, so a stream that stalls ends too.
    ``on_delta`` sees each streamed piece; ``max_tokens=None`` leaves the limit to the server.  Raises ServingError with the API's status and message."""
    import openai

    client = openai.AsyncOpenAI(base_url=base_url.rstrip("/") + "/v1", api_key=api_key or "EMPTY",
                                timeout=timeout, max_retries=0)
    extra: dict = {}
    if thinking is not None:
        extra["chat_template_kwargs"] = {"enable_thinking": thinking}
    kw = dict(model=model, messages=[{"role": "user", "content": prompt}], temperature=temperature,
              extra_body=extra or None)
    if max_tokens is not None:  # None: the server's own limit (what is left of max_model_len)
        kw["max_tokens"] = max_tokens
    if tools:
        kw["tools"] = tools
    t0 = time.monotonic()
    try:
        if not stream:
            resp = await client.chat.completions.create(**kw)
            total = time.monotonic() - t0
            choice = resp.choices[0]
            p, c, r = _usage(resp.usage)
            calls = tuple(tc.model_dump() for tc in (choice.message.tool_calls or ()))
            return ChatAnswer(resp.model, choice.message.content, _reasoning_of(choice.message),
                              choice.finish_reason, None, total, (c / total) if c and total > 0 else None, p, c, r,
                              calls)
        content: list[str] = []
        reasoning: list[str] = []
        finish, first, usage, got_model = None, None, None, model
        calls: dict[int, dict] = {}
        async with await client.chat.completions.create(**kw, stream=True,
                                                        stream_options={"include_usage": True}) as events:
            async for chunk in events:
                got_model = chunk.model or got_model
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    delta = choice.delta
                    piece_r = _reasoning_of(delta)
                    if (delta.content or piece_r) and first is None:
                        first = time.monotonic() - t0
                    if piece_r:
                        reasoning.append(piece_r)
                        if on_delta:
                            on_delta("reasoning", piece_r)
                    if delta.content:
                        content.append(delta.content)
                        if on_delta:
                            on_delta("content", delta.content)
                    for tc in delta.tool_calls or ():
                        cur = calls.setdefault(tc.index, {"id": tc.id, "type": "function",
                                                          "function": {"name": "", "arguments": ""}})
                        if tc.function is not None:
                            cur["function"]["name"] += tc.function.name or ""
                            cur["function"]["arguments"] += tc.function.arguments or ""
                            if on_delta:
                                on_delta("tool", (tc.function.name or "") + (tc.function.arguments or ""))
                    if choice.finish_reason:
                        finish = choice.finish_reason
        total = time.monotonic() - t0
        p, c, r = _usage(usage)
        gen = total - (first or 0.0)
        return ChatAnswer(got_model, "".join(content) or None, "".join(reasoning) or None, finish, first, total,
                          (c / gen) if c and gen > 0 else None, p, c, r, tuple(calls[i] for i in sorted(calls)))
    except openai.APIStatusError as exc:
        msg = _api_message(exc)
        raise ServingError(f"{exc.status_code}: {msg}", exc.status_code, kind=f"http_{exc.status_code}") from None
    except openai.APITimeoutError:
        what = "the stream stalled: no data" if stream else "no answer"
        raise ServingError(f"{what} for {timeout:g} s (timeout)", kind="timeout") from None
    except openai.APIConnectionError as exc:
        raise ServingError(f"cannot connect to {base_url}: {_short(exc.__cause__ or exc)}", kind="connection") from None
    except openai.APIError as exc:
        raise ServingError(f"API error: {_short(exc)}", kind="api") from None
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
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
            return str(err["message"]).splitlines()[0][:300]
        if isinstance(body.get("message"), str):
            return body["message"].splitlines()[0][:300]
    return _short(exc)
