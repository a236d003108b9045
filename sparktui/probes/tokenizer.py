"""The served model's own tokenizer, through vLLM's ``/tokenize`` and ``/detokenize``.

vLLM's API server (``vllm/entrypoints/serve/tokenize``) answers, outside ``/v1``:

- ``POST /tokenize {"model", "prompt", "add_special_tokens"}`` (completion form) or
  ``{"model", "messages", "add_generation_prompt", "chat_template_kwargs"}`` (chat form: the chat
  template applied as a chat completion applies it) -> ``{"count", "max_model_len", "tokens": [...]}``;
- ``POST /detokenize {"model", "tokens": [...]}`` -> ``{"prompt": "..."}``.

The load test builds prompts of an exact token length with them, as ``vllm bench serve`` does
with a local tokenizer (the served model's files live on the node, not here).  Reads are the
server-as-a-stranger reads of ``api_guard``: each body capped (``read_body``), each call within
``timeout`` seconds, error text one safe line without the key.  The detokenized text is never
shown: it only goes back to the same server as a prompt, so it is kept byte for byte (cleaning it
would change its length in tokens).  No Textual here.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from .api_guard import ServingError, read_body, server_line, token_count

NOT_THERE = (404, 405, 501)  # a server without the endpoints (another OpenAI-compatible server, a proxy)


class ServerTokenizer:
    """``async with ServerTokenizer(base_url, model, key) as tok: await tok.tokenize(...)``;
    every failure is a one-line ``ServingError`` (kind ``no_tokenize`` when the server has no
    such endpoint)."""

    def __init__(self, base_url: str, model: str, api_key: str | None, *, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.model = model
        self._key = api_key
        self.timeout = timeout
        self.max_model_len: int | None = None  # from the last /tokenize answer
        self._http: Any = None

    def __repr__(self) -> str:  # the key stays out of reprs and tracebacks
        return f"ServerTokenizer({self.base_url!r}, model={self.model!r})"

    async def __aenter__(self) -> "ServerTokenizer":
        import aiohttp

        headers = {"Accept-Encoding": "identity"}  # nothing inflated: the cap counts what is read
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout), headers=headers,
                                           auto_decompress=False)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def _post(self, path: str, body: dict) -> dict:
        import aiohttp

        url = f"{self.base_url}{path}"
        try:
            async with asyncio.timeout(self.timeout):
                async with self._http.post(url, json=body) as r:
                    raw = await read_body(r, path)
                    status = r.status
        except TimeoutError:
            raise ServingError(f"{path}: no complete answer within {self.timeout:g} s (timeout)",
                               kind="timeout") from None
        except aiohttp.ClientError as exc:
            text = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise ServingError(server_line(f"{path}: {text}", self._key), kind="connection") from None
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            obj = None
        if status != 200:
            err = obj.get("error") if isinstance(obj, dict) else None
            if status in NOT_THERE and not isinstance(err, dict):  # the framework's own 404, not vLLM's answer
                raise ServingError(f"server has no {path}", status, kind="no_tokenize")
            msg = err.get("message") if isinstance(err, dict) else None
            raise ServingError(server_line(f"{path}: HTTP {status}" + (f": {msg}"[:240] if msg else ""), self._key),
                               status, kind=f"http_{status}")
        if not isinstance(obj, dict):
            raise ServingError(f"{path}: not a JSON object", kind="malformed")
        return obj

    async def _tokens(self, body: dict) -> list[int]:
        obj = await self._post("/tokenize", {"model": self.model, **body})
        tokens = obj.get("tokens")
        if not isinstance(tokens, list) or any(token_count(t) is None for t in tokens):
            raise ServingError("/tokenize: no list of token ids", kind="malformed")
        if token_count(obj.get("max_model_len")):
            self.max_model_len = obj["max_model_len"]
        return tokens

    async def tokenize(self, text: str) -> list[int]:
        """The ids of ``text`` alone (no BOS: a piece to cut prompts from)."""
        return await self._tokens({"prompt": text, "add_special_tokens": False})

    async def count_chat(self, content: str, chat_template_kwargs: dict | None = None) -> int:
        """How many tokens a chat completion of one user message ``content`` is to the server: its
        chat template and generation prompt included, as ``usage.prompt_tokens`` will say."""
        body: dict = {"messages": [{"role": "user", "content": content}], "add_generation_prompt": True}
        if chat_template_kwargs:
            body["chat_template_kwargs"] = chat_template_kwargs
        return len(await self._tokens(body))

    async def detokenize(self, tokens: list[int]) -> str:
        obj = await self._post("/detokenize", {"model": self.model, "tokens": tokens})
        text = obj.get("prompt")
        if not isinstance(text, str):
            raise ServingError("/detokenize: no 'prompt' text", kind="malformed")
        return text
