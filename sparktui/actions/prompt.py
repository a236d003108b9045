"""Test prompts through the openai client: what the answer means, canned smoke prompts, a history.

The answer itself comes from ``probes.serving.chat``; here it is explained (the story's first prompt
came back with ``content: None`` because thinking used up ``max_tokens``), and the prompts an
operator sends are kept per cluster so the next incident starts from them.  No Textual here.
"""

from __future__ import annotations

import asyncio
import json
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..config import Config
from ..logs.safe_files import open_private, private_dir
from ..model import FAIL
from ..nodes.base import Node
from ..probes.serving import ChatAnswer, OnDelta, ServingError, chat, deadline_error
from .base import Action, ActionContext, ActionResult
from .serving_target import Target, resolve

# a tool the "tool" smoke prompt offers; the server needs --enable-auto-tool-choice to use it
TOOLS: dict[str, dict] = {
    "get_weather": {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather of a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    },
}


@dataclass(frozen=True)
class Canned:
    name: str
    what: str
    text: str
    max_tokens: int = 256
    thinking: bool | None = None
    tool: str | None = None

    @property
    def tools(self) -> list[dict] | None:
        return [TOOLS[self.tool]] if self.tool in TOOLS else None


def canned() -> tuple[Canned, ...]:
    data = tomllib.loads((Path(__file__).with_name("prompts.toml")).read_text())
    return tuple(Canned(**p) for p in data["prompt"])


def explain(answer: ChatAnswer, *, max_tokens: int | None, thinking: bool | None) -> str | None:
    """One or two sentences on what ``finish_reason`` and the fields mean, when they need it."""
    limit = f"all {max_tokens} tokens" if max_tokens else "the server's token limit"
    content = (answer.content or "").strip()
    reasoning = (answer.reasoning or "").strip()
    if answer.finish_reason == "length":
        if not content and reasoning:
            return (f"content is empty because thinking used up {limit} (finish_reason "
                    f"'length'): the answer never started. Raise max_tokens or turn thinking off.")
        if not content:
            return f"nothing came back within {limit} (finish_reason 'length'): raise max_tokens."
        return f"the answer was cut at {limit} (finish_reason 'length'); raise max_tokens for the rest."
    if "<think>" in content or "</think>" in content:
        return ("the thinking is inline in content (<think> tags): the server runs without a reasoning parser; "
                "start vllm serve with --reasoning-parser (qwen3 for Qwen3) to get it apart.")
    if answer.finish_reason == "stop" and not content and reasoning:
        return ("the whole answer sits in the reasoning field: the model never closed its thinking, so the "
                "reasoning parser kept everything there. Read reasoning, or turn thinking off.")
    if answer.finish_reason == "tool_calls":
        return "the model called a tool instead of answering (finish_reason 'tool_calls')."
    if thinking is False and reasoning:
        return "thinking was turned off but reasoning came back: this chat template ignores enable_thinking."
    if answer.finish_reason not in (None, "stop", "tool_calls"):
        return f"finish_reason '{answer.finish_reason}': the server ended the answer early."
    return None


async def send(config: Config, nodes: Mapping[str, Node], text: str, *, thinking: bool | None = None,
               max_tokens: int | None = None, stream: bool = True, timeout: float = 120.0,
               tools: list[dict] | None = None, on_delta: OnDelta | None = None,
               target: Target | None = None) -> tuple[Target, ChatAnswer]:
    """Resolve the cluster's API (unless ``target`` is given) and send one prompt, all within
    ``timeout`` seconds (the server's strings come back cleaned and without the key: ``chat``)."""
    try:
        async with asyncio.timeout(timeout):
            target = target or await resolve(config, nodes, timeout=min(timeout, 15.0))
            answer = await chat(target.base_url, target.model, text, api_key=target.api_key, max_tokens=max_tokens,
                                thinking=thinking, stream=stream, timeout=timeout, tools=tools, on_delta=on_delta)
    except TimeoutError:
        raise deadline_error(timeout, stream) from None
    return target, answer


class History:
    """Prompts sent to one cluster, newest last, in a JSON-lines file of the operator's own (0600)."""

    LIMIT = 200

    def __init__(self, path: Path) -> None:
        self.path = path
        self.items: list[str] = self._load()

    @classmethod
    def for_cluster(cls, cluster: str) -> "History":
        from ..session import state_dir

        safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in cluster) or "_"
        return cls(state_dir() / "prompts" / f"{safe}.jsonl")

    def _load(self) -> list[str]:
        try:
            raw = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        out = []
        for line in raw.splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue  # a torn line from a crash: skip it, keep the rest
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                out.append(item["text"])
        return out[-self.LIMIT:]

    def add(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        if text in self.items:
            self.items.remove(text)
        self.items.append(text)
        self.items = self.items[-self.LIMIT:]
        try:
            private_dir(self.path.parent)
            tmp = self.path.with_suffix(".tmp")
            with open_private(tmp, "w", encoding="utf-8") as f:
                f.writelines(json.dumps({"text": t}) + "\n" for t in self.items)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only home must not break prompting; the history is a convenience


class PromptAction(Action):
    """One smoke prompt (``text``, default the canned "hello") through the cluster's API."""

    def __init__(self, text: str | None = None, thinking: bool | None = None, max_tokens: int | None = None) -> None:
        first = canned()[0]
        self.text = text or first.text
        self.thinking = thinking
        self.max_tokens = max_tokens if max_tokens is not None else (None if text else first.max_tokens)

    async def execute(self, ctx: ActionContext) -> ActionResult:
        async with ctx.step("prompt", self.text[:80]) as rec:
            try:
                target, answer = await send(ctx.config, ctx.nodes, self.text, thinking=self.thinking,
                                            max_tokens=self.max_tokens)
            except ServingError as exc:
                rec.status, rec.message = FAIL, str(exc)
                return ActionResult(self.name, False, str(exc), data={"error": str(exc), "status": exc.status})
            rec.message = (f"{answer.finish_reason}; {answer.completion_tokens} tokens"
                           + (f", ttft {answer.ttft_s * 1000:.0f} ms" if answer.ttft_s is not None else ""))
        note = explain(answer, max_tokens=self.max_tokens, thinking=self.thinking)
        data = {**answer.to_json(), "note": note, "base_url": target.base_url}
        ok = bool((answer.content or "").strip()) or bool(answer.tool_calls)
        return ActionResult(self.name, ok, note or f"{target.model} answered ({answer.finish_reason})", data=data)
