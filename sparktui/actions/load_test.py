"""The load test: N concurrent streaming chat completions for M requests or T seconds.

- Concurrency: a fixed pool of N worker tasks; each takes the next request number from a shared
  counter (the queue) until M were taken, the deadline passed, or ``stop()`` was called.  So at most
  N requests are ever in flight, and exactly N while work remains.
- Deadline (``duration``): no request starts after it; the ones in flight FINISH, so every started
  request is measured and the throughputs are not biased by half-answered requests -- but only
  within ``drain`` seconds (a fifth of the duration, 2 s at least, the per-request timeout at most):
  a server that drips or only pings would otherwise keep the run alive; the ones still in flight
  then are cancelled and counted as ``cancelled``.  ``duration`` in the summary runs to the last
  answer.
- ``stop()`` (Esc in the TUI, Ctrl+C in the CLI) cancels the requests in flight; they are left out
  of the records (``cancelled`` says how many) and what finished is still summarised.
- Each request: ``openai.AsyncOpenAI`` (max_retries=0: a retry would hide errors and skew latency,
  ``timeout`` bounds the whole request, with a short connect timeout; its HTTP client bounds every
  body and SSE line, ``probes.api_guard``), ``stream=True`` with
  ``stream_options.include_usage`` for the token counts.  A token chunk is one whose delta has
  content or reasoning (``reasoning`` since vLLM 0.17 / ``reasoning_content`` before; the openai
  delta object would carry both in ``model_extra``; the chunks are read as raw SSE JSON here, see
  ``_one``) -- reasoning tokens are generated tokens and cost the same.
- Thinking: the server's default is left alone (vllm bench serve sends nothing either); ``thinking``
  = False sends ``chat_template_kwargs.enable_thinking=false``.
- Prompts: the fixed set in ``load_prompts.json`` (cycled), or with ``random_input_len`` L random
  prompts of L tokens as the server counts them (``random_prompts``: its ``/tokenize``, the chat
  template included), built with ``seed`` before the clock starts; without ``/tokenize`` random words
  and a note that the length is approximate.  Each request's input length is what ``usage`` says
  (else the count made when building it): the summary's ``mean/min/max_input_len``.
  ``random_output_len`` sets max_tokens and ``ignore_eos`` as vllm bench does, so every answer has
  that length.
- Progress goes to ``on_progress(LoadProgress)`` after each request and every ``TICK`` s.
- Errors by kind: ``http_<status>``, ``timeout``, ``connection``, ``api`` (an error inside the
  stream), ``no_token`` (answered without a single token), ``too_large`` (a body or SSE line past
  1 MiB).  Messages are one safe line (``api_guard.server_line``) and never carry the API key.

``LoadTestAction`` wraps it for the registry and the faces: it resolves the cluster's API
(``serving_target.resolve``) and runs.  No Textual here.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..probes.api_guard import ServingError, http_client, server_line, token_count, unwrap
from .base import Action, ActionContext, ActionResult
from .load_stats import RequestRecord, summarize
from .random_prompts import Prompts, word_prompt
from .random_prompts import build as build_prompts

PROMPTS_FILE = Path(__file__).with_name("load_prompts.json")
TICK = 0.25  # seconds between time-based progress callbacks (duration mode needs them)
CONNECT_TIMEOUT = 5.0
PREP_TIMEOUT = 10.0  # seconds for each /tokenize or /detokenize call while building random prompts
DEFAULT_REQUESTS = 32

@dataclass(frozen=True)
class LoadSpec:
    requests: int | None = None  # M (None with a duration: as many as fit)
    duration: float | None = None  # T seconds (None: until M are done)
    concurrency: int = 8  # N
    max_tokens: int = 64
    random_input_len: int | None = None
    random_output_len: int | None = None
    seed: int = 0
    thinking: bool | None = None  # None: the server's default
    timeout: float = 120.0  # per request, seconds

    def validate(self) -> None:
        """ValueError with one line when a number makes no sense."""
        for name in ("requests", "concurrency", "max_tokens", "random_input_len", "random_output_len"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
                raise ValueError(f"--{name.replace('_', '-')} must be a positive integer (got {v!r})")
        for name in ("duration", "timeout"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 < v < float("inf")):
                raise ValueError(f"--{name} must be a positive number of seconds (got {v!r})")
        if not isinstance(self.seed, int):
            raise ValueError(f"--seed must be an integer (got {self.seed!r})")

    @property
    def total(self) -> int | None:
        if self.requests is None and self.duration is None:
            return DEFAULT_REQUESTS
        return self.requests


@dataclass(frozen=True)
class LoadProgress:
    done: int  # requests answered or failed
    total: int | None  # M, or None in pure duration mode
    failed: int
    in_flight: int
    elapsed: float
    duration: float | None
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        parts = []
        if self.total:
            parts.append(self.done / self.total)
        if self.duration:
            parts.append(self.elapsed / self.duration)
        return min(1.0, max(parts)) if parts else 0.0


@dataclass
class LoadResult:
    spec: LoadSpec
    records: list[RequestRecord]
    duration: float
    cancelled: int = 0  # requests in flight when stop() came
    stopped: bool = False
    summary: dict[str, Any] = field(default_factory=dict)


def fixed_prompts() -> list[str]:
    return list(json.loads(PROMPTS_FILE.read_text(encoding="utf-8"))["prompts"])


def classify(exc: BaseException, secret: str | None = None) -> tuple[str, str]:
    """(kind, one-line message) of a failed request."""
    import openai

    exc = unwrap(exc) or exc  # a bounded read the client's send wrapped
    if isinstance(exc, ServingError):
        kind = exc.kind
    elif isinstance(exc, (openai.APITimeoutError, asyncio.TimeoutError, TimeoutError)):
        kind = "timeout"
    elif isinstance(exc, openai.APIConnectionError):
        kind = "connection"
    elif isinstance(exc, openai.APIStatusError):
        kind = f"http_{exc.status_code}"
    elif isinstance(exc, (openai.APIError, StreamError, ValueError, TypeError, AttributeError, KeyError,
                          IndexError, RecursionError)):
        kind = "api"  # an error event or a garbled chunk inside the stream
    else:
        kind = type(exc).__name__
    text = str(exc).strip()
    cause = exc.__cause__ or exc.__context__
    if kind == "connection" and cause is not None and str(cause).strip():
        text = f"{text.rstrip('.')}: {str(cause).strip()}"  # "Connection error." alone says nothing
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) and not text:
        text = "no complete answer within the request timeout"
    return kind, server_line((text.splitlines() or [type(exc).__name__])[0][:240], secret)


class StreamError(Exception):
    """The server reported an error inside a stream that had started fine."""


def _error_text(err: Any) -> str:
    return str(err.get("message") or err) if isinstance(err, dict) else str(err)


class LoadRunner:
    """One load test against ``base_url`` (without ``/v1``).  ``run()`` once; ``stop()`` any time."""

    def __init__(self, base_url: str, model: str, api_key: str | None, spec: LoadSpec,
                 on_progress: Callable[[LoadProgress], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        spec.validate()
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.model = model
        self._key = api_key
        self.spec = spec
        self.on_progress = on_progress
        self.clock = clock
        self.records: list[RequestRecord] = []
        self._taken = 0
        self._in_flight = 0
        self._t0 = 0.0
        self._deadline: float | None = None
        self._stopping = False
        self._cancelled = 0
        self._tasks: list[asyncio.Task] = []
        self._prompts = fixed_prompts()
        self._rng = random.Random(spec.seed)
        self.inputs: Prompts | None = None  # the random prompts, once built
        self._prep: asyncio.Task | None = None

    def __repr__(self) -> str:  # the key stays out of reprs and tracebacks
        return f"LoadRunner({self.base_url!r}, model={self.model!r})"

    # ------------------------------------------------------------------ requests
    def _template_kwargs(self) -> dict | None:
        return None if self.spec.thinking is None else {"enable_thinking": self.spec.thinking}

    def _request(self, i: int) -> dict:
        s = self.spec
        if s.random_input_len and self.inputs is not None:
            text = self.inputs.texts[i % len(self.inputs.texts)]
        elif s.random_input_len:  # not built (a body looked at outside run()): words
            text = word_prompt(self._rng, s.random_input_len)
        else:
            text = self._prompts[i % len(self._prompts)]
        extra: dict = {}
        if (kwargs := self._template_kwargs()) is not None:
            extra["chat_template_kwargs"] = kwargs  # /tokenize is asked with the same, so counts agree
        if s.random_output_len:
            extra["ignore_eos"] = True  # vLLM's sampling param: answers run to max_tokens
        return dict(model=self.model, messages=[{"role": "user", "content": text}],
                    max_tokens=s.random_output_len or s.max_tokens, stream=True,
                    stream_options={"include_usage": True}, extra_body=extra or None)


    async def _one(self, client: Any, i: int) -> RequestRecord:
        t = self.clock()
        rec = RequestRecord(index=i, start=t - self._t0)
        if self.inputs is not None:
            rec.input_len = self.inputs.lengths[i % len(self.inputs.lengths)]
        try:
            async with asyncio.timeout(self.spec.timeout):  # the whole request: a drip or pings never end it
                last = await self._read(client, self._request(i), rec, t)
            rec.latency = last - t
            if rec.ttft is None:
                rec.error_kind, rec.error = "no_token", "the stream ended without a single token"
            else:
                rec.ok = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            rec.error_kind, rec.error = classify(exc, self._key)
            rec.latency = self.clock() - t
        return rec

    async def _read(self, client: Any, kw: dict, rec: RequestRecord, t: float) -> float:
        """Read one streamed answer into ``rec``; the time of its last choices chunk."""
        last = t
        # the raw SSE lines through the openai client (auth, timeouts, status errors are its own):
        # one json.loads a chunk instead of a pydantic model keeps the client's CPU off the
        # server's cores when both share a machine
        async with client.chat.completions.with_streaming_response.create(**kw) as resp:
            async for line in resp.iter_lines():
                if not line.startswith("data:"):
                    continue  # blank separators, SSE comments (pings)
                data = line[5:].strip()
                if data == "[DONE]":
                    continue  # read to the end: a response left unread costs its connection
                now = self.clock()
                chunk = json.loads(data)
                if chunk.get("error"):
                    raise StreamError(_error_text(chunk["error"]))
                usage = chunk.get("usage")
                if usage:  # only plain counts: a string, NaN or 10**400 is no count
                    rec.prompt_tokens = token_count(usage.get("prompt_tokens")) or 0
                    rec.output_tokens = token_count(usage.get("completion_tokens"))
                choices = chunk.get("choices")
                if not choices:
                    continue
                delta = choices[0].get("delta") or {}
                if delta.get("content") or delta.get("reasoning") or delta.get("reasoning_content"):
                    if rec.ttft is None:
                        rec.ttft = now - t
                    else:
                        rec.itl.append(now - last)
                    rec.chunks += 1
                last = now  # as vllm bench: the answer ends with its last choices chunk, not the usage one
        return last

    # ------------------------------------------------------------------ the pool
    def _take(self) -> int | None:
        total = self.spec.total
        if self._stopping or (total is not None and self._taken >= total):
            return None
        if self._deadline is not None and self.clock() >= self._deadline:
            return None
        i = self._taken
        self._taken += 1
        return i

    async def _worker(self, client: Any) -> None:
        while (i := self._take()) is not None:
            self._in_flight += 1
            try:
                rec = await self._one(client, i)
            finally:
                self._in_flight -= 1
            self.records.append(rec)
            self._report()

    def progress(self) -> LoadProgress:
        errors: dict[str, int] = {}
        for r in self.records:
            if not r.ok:
                errors[r.error_kind or "error"] = errors.get(r.error_kind or "error", 0) + 1
        return LoadProgress(done=len(self.records), total=self.spec.total, failed=sum(errors.values()),
                            in_flight=self._in_flight, elapsed=self.clock() - self._t0 if self._t0 else 0.0,
                            duration=self.spec.duration, errors=errors)

    def _report(self) -> None:
        if self.on_progress is not None:
            try:
                self.on_progress(self.progress())
            except Exception:  # a face's rendering bug must not stop the load
                pass

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            self._report()

    def stop(self) -> None:
        """Start no more requests and cancel the ones in flight (``run`` then returns what finished)."""
        if not self._stopping:
            self._cancelled = self._in_flight
        self._stopping = True
        if self._prep is not None:
            self._prep.cancel()
        for t in self._tasks:
            t.cancel()

    async def _prepare(self) -> None:
        """The random prompts, built before the clock starts (their /tokenize calls are not load)."""
        s = self.spec
        assert s.random_input_len
        count = s.total or max(32, 4 * s.concurrency)  # a duration run cycles them
        self._prep = asyncio.create_task(build_prompts(
            self.base_url, self.model, self._key, self._rng, length=s.random_input_len, count=count,
            chat_template_kwargs=self._template_kwargs(), timeout=min(s.timeout, PREP_TIMEOUT)))
        try:
            self.inputs = await self._prep
        except asyncio.CancelledError:
            me = asyncio.current_task()
            if not self._stopping or (me is not None and me.cancelling()):
                raise
            # stop() while building: the pool below takes no request
        finally:
            self._prep = None

    async def run(self) -> LoadResult:
        import openai

        s = self.spec
        if s.random_input_len and self.inputs is None and not self._stopping:
            await self._prepare()
        timeout = openai.Timeout(s.timeout, connect=min(CONNECT_TIMEOUT, s.timeout))
        client = openai.AsyncOpenAI(base_url=self.base_url + "/v1", api_key=self._key or "EMPTY", max_retries=0,
                                    timeout=timeout, http_client=http_client(timeout=timeout))
        self._t0 = self.clock()
        self._deadline = self._t0 + s.duration if s.duration else None
        ticker = asyncio.create_task(self._ticker())
        self._tasks = [asyncio.create_task(self._worker(client)) for _ in range(s.concurrency)]
        pool = asyncio.gather(*self._tasks, return_exceptions=True)
        try:
            try:
                # the run ends by its duration: the in-flight tail gets ``drain`` seconds to finish
                end = None if s.duration is None else s.duration + min(s.timeout, max(2.0, s.duration / 5))
                results = await asyncio.wait_for(asyncio.shield(pool), end)
            except TimeoutError:
                self._cancelled = self._in_flight
                for t in self._tasks:
                    t.cancel()
                results = await pool
            for r in results:
                if isinstance(r, BaseException) and not isinstance(r, asyncio.CancelledError):
                    raise r
        except asyncio.CancelledError:
            for t in self._tasks:
                t.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            raise
        finally:
            ticker.cancel()
            try:
                await client.close()
            except Exception:
                pass
        ends = [r.start + (r.latency or 0.0) for r in self.records]
        # the run lasts from its start to the last answer (the in-flight tail included)
        duration = max(ends) if ends else self.clock() - self._t0
        self.records.sort(key=lambda r: r.index)
        self._report()
        result = LoadResult(s, self.records, duration, cancelled=self._cancelled,
                            stopped=self._stopping)
        result.summary = summarize(self.records, duration, max_concurrency=s.concurrency)
        result.summary.update(model=self.model, base_url=self.base_url, cancelled=result.cancelled,
                              random_input_len=s.random_input_len,
                              input_len_note=self.inputs.note if self.inputs is not None else "")
        return result


# ---------------------------------------------------------------------- target + action
async def target_of(config: Any, nodes: Any) -> tuple[str, str, str | None, str]:
    """(base URL, model, API key, note).  A server that does not answer is not an error here: the
    load runs anyway so its requests fail and are counted by kind (connection refused, 401, ...).
    Raises ServingError only when not even a URL can be had (no route to the head node)."""
    from ..probes.serving import ServingError
    from .serving_target import base_url, configured_model, resolve

    try:
        t = await resolve(config, nodes)
        return t.base_url, t.model, t.api_key, f"{t.base_url} ({t.via}) model {t.model}"
    except ServingError as exc:
        url, _, via = await base_url(config, nodes)
        model = configured_model(config)
        return url, model, config.api_key(), f"{url} ({via}) model {model}; server check failed: {exc}"


class LoadTestAction(Action):
    """The registry's "load-test": not mutating (it only sends chat requests)."""

    def __init__(self, spec: LoadSpec | None = None, on_progress: Callable[[LoadProgress], None] | None = None) -> None:
        self.spec = spec or LoadSpec()
        self.on_progress = on_progress
        self.runner: LoadRunner | None = None
        self.result: LoadResult | None = None
        self.note = ""

    def stop(self) -> None:
        if self.runner is not None:
            self.runner.stop()

    async def execute(self, ctx: ActionContext) -> ActionResult:
        async with ctx.step("target", "finding the API") as st:
            url, model, key, self.note = await target_of(ctx.config, ctx.nodes)
            st.message = self.note
            if "server check failed" in self.note:
                st.status = "warn"
        async with ctx.step("load", f"{self.spec.concurrency} concurrent streams") as st:
            self.runner = LoadRunner(url, model, key, self.spec, on_progress=self.on_progress)
            self.result = await self.runner.run()
            s = self.result.summary
            st.message = f"{s['completed']} completed, {s['failed']} failed"
            if s["failed"]:
                st.status = "warn"
        s = self.result.summary
        text = (f"{s['completed']} completed, {s['failed']} failed in {s['duration']:.1f} s: "
                f"{s['request_throughput']:.2f} req/s, {s['output_throughput']:.1f} tok/s, "
                f"p99 TTFT {s['p99_ttft_ms']:.0f} ms, p99 E2EL {s['p99_e2el_ms']:.0f} ms")
        if s.get("random_input_len") and s.get("mean_input_len") is not None:
            text += f", input {s['mean_input_len']:.0f} tokens a request ({s['random_input_len']} asked)"
        if s.get("input_len_note"):
            text += f"; {s['input_len_note']}"
        return ActionResult(self.name, ok=s["failed"] == 0 and s["completed"] > 0, summary=text, data=s)
