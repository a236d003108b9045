"""The prompt screen (key ``P``): one test prompt at a time, the answer streamed in with its
reasoning and its content apart, what ``finish_reason`` means, and the numbers (time to first token,
tokens/s, token counts with reasoning apart).

The request runs in an exclusive worker through ``actions.prompt`` (IO stays out of the widgets);
streamed pieces land in buffers that a 20 Hz timer paints, so a fast model costs one repaint per
frame, not one per token.  Esc cancels a stream mid-way, and goes back when nothing runs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Input, Static
from textual.worker import Worker, WorkerState

from ..logs.sanitize import clean_line, clean_text
from ..model import FAIL, ActionEvent
from .screens.action import RunsActions

if TYPE_CHECKING:
    from ..actions.prompt import Canned
    from ..actions.serving_target import Target
    from ..probes.serving import ChatAnswer

THINKING = {None: "server default", True: "on", False: "off"}
NEXT_THINKING = {None: False, False: True, True: None}


class PromptDone(Message):
    def __init__(self, answer: "ChatAnswer", note: str | None) -> None:
        super().__init__()
        self.answer, self.note = answer, note


class PromptFailed(Message):
    def __init__(self, error: str, kind: str, status: int | None) -> None:
        super().__init__()
        self.error, self.kind, self.status = error, kind, status


class TargetFound(Message):
    def __init__(self, target: "Target") -> None:
        super().__init__()
        self.target = target


class HistoryInput(Input):
    """The prompt line: Up/Down walk the cluster's prompt history."""

    BINDINGS = [Binding("up", "older", "Older prompt", show=False),
                Binding("down", "newer", "Newer prompt", show=False)]

    def __init__(self, items: list[str], **kw) -> None:
        super().__init__(**kw)
        self.items = items
        self.pos = len(items)

    def action_older(self) -> None:
        if self.items and self.pos > 0:
            self.pos -= 1
            self.value = self.items[self.pos]
            self.cursor_position = len(self.value)

    def action_newer(self) -> None:
        if self.pos < len(self.items) - 1:
            self.pos += 1
            self.value = self.items[self.pos]
        else:
            self.pos, self.value = len(self.items), ""
        self.cursor_position = len(self.value)


MAX_TOKENS_LIMIT = 1_000_000  # far past any model's context: a typo, not a budget


def parse_max_tokens(text: str) -> int | None:
    """The prompt screen's max tokens field: empty is the server's limit; else a whole number
    1..MAX_TOKENS_LIMIT, or ValueError with a one-line reason."""
    text = text.strip().replace(",", "").replace("_", "")
    if not text:
        return None
    if not text.isdigit() or not 1 <= int(text) <= MAX_TOKENS_LIMIT:
        raise ValueError(f"max tokens must be a whole number from 1 to {MAX_TOKENS_LIMIT:,} (empty: the server's limit)")
    return int(text)


class MaxTokensModal(ModalScreen["int | None | bool"]):
    """Max tokens for the next prompts: Enter sets it (empty: the server's limit), Esc keeps it
    (dismissed with False); a bad number is said under the field and the box stays open."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="max-tokens-cancel")]

    def __init__(self, current: int | None) -> None:
        super().__init__()
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog max-tokens"):
            yield Static("Max tokens per answer (Enter: set, empty: the server's limit, Esc: keep)",
                         classes="dialog-title")
            yield Input(str(self.current or ""), placeholder="server limit", id="max-tokens-input")
            yield Static(id="max-tokens-error")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            value = parse_max_tokens(event.value)
        except ValueError as exc:
            self.query_one("#max-tokens-error", Static).update(Content.styled(str(exc), "$error"))
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(False)


class PromptScreen(RunsActions, Screen[None]):
    BINDINGS = [
        Binding("escape", "back", "Back / cancel", id="prompt-back"),
        Binding("ctrl+t", "thinking", "Thinking", id="prompt-thinking"),
        Binding("ctrl+n", "canned", "Canned", id="prompt-canned"),
        Binding("ctrl+o", "stream", "Stream on/off", id="prompt-stream"),
        Binding("ctrl+r", "more_tokens", "More tokens", id="prompt-more"),
        Binding("ctrl+l", "max_tokens", "Max tokens", id="prompt-max-tokens"),  # ctrl+k is the Input's
    ]

    def __init__(self, entry=None, action_cls=None, make_context=None) -> None:
        super().__init__()
        self._make_context = make_context
        from ..actions.prompt import History, canned

        self.entry = entry
        self.canned: tuple["Canned", ...] = canned()
        self.canned_pos = -1
        self.thinking: bool | None = None
        self.stream = True
        self.max_tokens: int | None = None
        self.tools: list[dict] | None = None
        self.target: "Target | None" = None
        self.history = History.for_cluster(self._cluster_name())
        self.answer: "ChatAnswer | None" = None
        self.last_text = ""
        self._reasoning: list[str] = []
        self._content: list[str] = []
        self._tools: list[str] = []
        self._dirty = False
        self._t0 = 0.0
        self._first: float | None = None
        self._worker: Worker | None = None

    def _cluster_name(self) -> str:
        engine = getattr(self.app, "engine", None)
        config = getattr(engine, "config", None)
        return config.cluster.name if config is not None else "demo"

    # ------------------------------------------------------------------ layout
    def compose(self) -> ComposeResult:
        with Vertical(classes="prompt-screen"):
            yield Static(Content.assemble(("Test prompt", "bold"), ("   finding the API…", "$text-muted")),
                         id="prompt-title")
            yield Static(id="prompt-options")
            yield HistoryInput(self.history.items, id="prompt-input",
                               placeholder="Ask the model… (Enter sends, Up/Down history, Ctrl+N canned prompts)")
            with Horizontal(classes="prompt-answer"):
                with VerticalScroll(id="prompt-reasoning-box", classes="prompt-box") as box:
                    box.border_title = "reasoning"
                    yield Static(id="prompt-reasoning")
                with VerticalScroll(id="prompt-content-box", classes="prompt-box") as box:
                    box.border_title = "content"
                    yield Static(id="prompt-content")
            yield Static(id="prompt-tools")
            yield Static(id="prompt-stats")
            yield Static(id="prompt-note")
        yield Footer()

    def on_mount(self) -> None:
        self._show_options()
        self.set_interval(0.05, self._paint)
        self.query_one(HistoryInput).focus()
        self.find_target()

    # ------------------------------------------------------------------ workers (IO lives in actions/)
    def _action_ctx(self):
        return self.make_context(emit=lambda ev: None, confirm=_never)

    @work(exclusive=True, exit_on_error=False, group="prompt-target", description="find the API")
    async def find_target(self) -> None:
        from ..actions.serving_target import resolve
        from ..probes.serving import ServingError

        ctx = self._action_ctx()
        try:
            self.post_message(TargetFound(await resolve(ctx.config, ctx.nodes, timeout=10)))
        except ServingError as exc:
            self.post_message(PromptFailed(str(exc), exc.kind, exc.status))

    @work(exclusive=True, exit_on_error=False, group="prompt", description="send a prompt")
    async def send_prompt(self, text: str) -> None:
        from ..actions.prompt import explain, send
        from ..probes.serving import ServingError

        ctx = self._action_ctx()
        try:
            target, answer = await send(ctx.config, ctx.nodes, text, thinking=self.thinking, max_tokens=self.max_tokens,
                                        stream=self.stream, tools=self.tools, on_delta=self._on_delta,
                                        target=self.target)
        except ServingError as exc:
            if exc.kind in ("connection", "unreachable"):
                self.target = None  # the server moved or restarted: find it again next time
            self.post_message(PromptFailed(str(exc), exc.kind, exc.status))
            return
        if self.target is None:
            self.post_message(TargetFound(target))
        self.post_message(PromptDone(answer, explain(answer, max_tokens=self.max_tokens, thinking=self.thinking)))

    def _on_delta(self, kind: str, text: str) -> None:
        # runs in the worker, on the app's loop: buffer only; the timer paints
        if self._first is None:
            self._first = time.monotonic() - self._t0
        {"reasoning": self._reasoning, "content": self._content}.get(kind, self._tools).append(text)
        self._dirty = True

    # ------------------------------------------------------------------ painting
    def _paint(self) -> None:
        if not self._dirty:
            return
        self._dirty = False
        self.query_one("#prompt-reasoning", Static).update(Text(clean_text("".join(self._reasoning))))
        self.query_one("#prompt-content", Static).update(Text(clean_text("".join(self._content))))
        if self._tools:
            self.query_one("#prompt-tools", Static).update(Text("tool call: " + clean_line("".join(self._tools))))
        if self._worker is not None and self._worker.is_running:
            n = len(self._reasoning) + len(self._content)
            ttft = f"ttft {self._first * 1000:.0f} ms   " if self._first is not None else ""
            self.query_one("#prompt-stats", Static).update(
                Content.styled(f"streaming…   {ttft}{n} pieces   {time.monotonic() - self._t0:.1f} s   Esc cancels",
                               "$text-muted"))

    def _show_options(self) -> None:
        canned = self.canned[self.canned_pos] if self.canned_pos >= 0 else None
        parts = [("thinking ", "$text-muted"), (THINKING[self.thinking], "bold"), ("  (Ctrl+T)   ", "$text-muted"),
                 ("max tokens ", "$text-muted"), (str(self.max_tokens or "server limit"), "bold"),
                 ("  (Ctrl+L)", "$text-muted"),
                 ("   stream ", "$text-muted"), ("on" if self.stream else "off", "bold"), ("  (Ctrl+O)", "$text-muted")]
        if canned is not None:
            parts += [("   canned ", "$text-muted"), (canned.name, "bold"), (f": {canned.what}", "$text-muted")]
        self.query_one("#prompt-options", Static).update(Content.assemble(*parts))

    def _set_state(self, state: str) -> None:
        for s in ("-streaming", "-done", "-fail", "-length"):
            self.remove_class(s)
        if state:
            self.add_class(state)

    # ------------------------------------------------------------------ messages
    def on_target_found(self, message: TargetFound) -> None:
        t = message.target
        self.target = t
        where = f"{t.via} via {t.node}" if t.node else t.via
        self.query_one("#prompt-title", Static).update(Content.assemble(
            ("Test prompt  ", "bold"), (t.model, "$accent bold"), (f"  at {t.base_url} ({where})", "$text-muted"),
            (f"  vLLM {t.version}" if t.version else "", "$text-muted"), ("   Esc: back / cancel", "$text-muted")))

    def on_prompt_done(self, message: PromptDone) -> None:
        a = self.answer = message.answer
        # the whole answer replaces the streamed pieces (non-streamed answers arrive only here)
        self._reasoning, self._content = [a.reasoning or ""], [a.content or ""]
        self._tools = [f"{(tc.get('function') or {}).get('name')}({(tc.get('function') or {}).get('arguments')})"
                       for tc in a.tool_calls]
        self._dirty = True
        self._paint()
        if not a.content:
            self.query_one("#prompt-content", Static).update(Content.styled("(none: content is null)", "$warning"))
        if not a.reasoning:
            self.query_one("#prompt-reasoning", Static).update(Content.styled("(none)", "$text-muted"))
        self.query_one("#prompt-stats", Static).update(_stats(a))
        note = self.query_one("#prompt-note", Static)
        if message.note:
            offer = ("   Ctrl+R: 4x the tokens   Ctrl+T: thinking off" if a.finish_reason == "length" else "")
            note.update(Content.assemble(("why: ", "$warning bold"), message.note, (offer, "$accent")))
        else:
            note.update("")
        self._set_state("-length" if a.finish_reason == "length" else "-done")
        self._record("ok" if a.content or a.tool_calls else "warn",
                     f"{a.model}: finish {a.finish_reason}, {a.completion_tokens} tokens"
                     + (f", ttft {a.ttft_s * 1000:.0f} ms" if a.ttft_s is not None else ""))

    def on_prompt_failed(self, message: PromptFailed) -> None:
        self._set_state("-fail")
        hint = {"auth": "check the API key variable the config names (api_key_env)",
                "http_401": "check the API key variable the config names (api_key_env)",
                "timeout": "the server stopped sending: look at the head node's log",
                "connection": "is the server up? (launch, or the head pane's serving line)",
                "unreachable": "is the server up? (launch, or the head pane's serving line)",
                "malformed": "something between here and vLLM rewrote the stream"}.get(message.kind, "")
        self.query_one("#prompt-stats", Static).update(Content.styled(clean_line(message.error), "$error"))
        self.query_one("#prompt-note", Static).update(Content.styled(hint, "$text-muted"))
        if self._worker is not None:  # a failed request is a timeline fact; not finding the API before one is not
            self._record(FAIL, clean_line(message.error))

    def _record(self, status: str, message: str) -> None:
        engine = getattr(self.app, "engine", None)
        if engine is not None:
            engine.emit(ActionEvent("prompt", "answer", status, message))  # type: ignore[arg-type]

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is self._worker and event.state is WorkerState.CANCELLED:
            self._set_state("-fail")
            self.query_one("#prompt-stats", Static).update(Content.styled("cancelled mid-stream", "$warning"))
            self._record("cancelled", "cancelled mid-stream")

    # ------------------------------------------------------------------ actions
    @on(Input.Submitted, "#prompt-input")
    def submit(self, event: Input.Submitted) -> None:
        self.send(event.value)

    def send(self, text: str) -> None:
        text = text.strip()
        if not text or (self._worker is not None and self._worker.is_running):
            return
        if self.canned_pos < 0 or text != self.canned[self.canned_pos].text:
            self.tools = None  # typed by hand: no tool offered
        self.history.add(text)
        inp = self.query_one(HistoryInput)
        inp.items, inp.pos = self.history.items, len(self.history.items)
        inp.value = ""  # the prompt stays in the history (Up brings it back)
        self.last_text = text
        self._reasoning, self._content, self._tools = [], [], []
        self._first, self._t0 = None, time.monotonic()
        for wid in ("#prompt-reasoning", "#prompt-content", "#prompt-tools", "#prompt-note"):
            self.query_one(wid, Static).update("")
        self._set_state("-streaming")
        self._dirty = True
        self._worker = self.send_prompt(text)

    def action_back(self) -> None:
        if self._worker is not None and self._worker.is_running:
            self._worker.cancel()
            return
        self.dismiss(None)

    def action_thinking(self) -> None:
        self.thinking = NEXT_THINKING[self.thinking]
        self._show_options()

    def action_stream(self) -> None:
        self.stream = not self.stream
        self._show_options()

    def action_canned(self) -> None:
        self.canned_pos = (self.canned_pos + 1) % len(self.canned)
        c = self.canned[self.canned_pos]
        inp = self.query_one(HistoryInput)
        inp.value, inp.cursor_position = c.text, len(c.text)
        self.max_tokens, self.tools = c.max_tokens, c.tools
        if c.thinking is not None:
            self.thinking = c.thinking
        self._show_options()
        inp.focus()

    def action_max_tokens(self) -> None:
        self.app.push_screen(MaxTokensModal(self.max_tokens), self._set_max_tokens)

    def _set_max_tokens(self, value: "int | None | bool") -> None:
        if value is not False:  # False: Esc, the budget stays
            self.max_tokens = value  # type: ignore[assignment]
            self._show_options()
        self.query_one(HistoryInput).focus()

    def action_more_tokens(self) -> None:
        """After a 'length' finish: four times the tokens, the same prompt again."""
        base = self.max_tokens or (self.answer.completion_tokens if self.answer else None) or 256
        self.max_tokens = base * 4
        self._show_options()
        inp = self.query_one(HistoryInput)
        self.send(inp.value or self.last_text)


def _stats(a: "ChatAnswer") -> Content:
    parts: list = [("finish ", "$text-muted"), (str(a.finish_reason), "bold")]
    if a.ttft_s is not None:
        parts += [("   ttft ", "$text-muted"), (f"{a.ttft_s * 1000:.0f} ms", "bold")]
    if a.shown_rate is not None:
        parts += [("   ", ""), (f"{a.shown_rate:.1f}", "bold"), (" tok/s", "$text-muted")]
    parts += [("   tokens: prompt ", "$text-muted"), (str(a.prompt_tokens), "bold"),
              (", completion ", "$text-muted"), (str(a.completion_tokens), "bold")]
    if a.reasoning_tokens is not None:
        parts += [(" (reasoning ", "$text-muted"), (str(a.reasoning_tokens), "bold"), (")", "$text-muted")]
    parts += [(f"   {a.total_s:.2f} s", "$text-muted")]
    return Content.assemble(*parts)


async def _never(title: str, detail: str) -> bool:
    return False  # a prompt changes nothing: there is never anything to confirm
