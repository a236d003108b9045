"""Issue 32, TUI items: zoom (8), state colours readable in every theme (9), help/palette/prompt/load-test
details (11)."""

from __future__ import annotations

import pytest
from conftest import screen_text, wait_for
from textual.widgets import DataTable

from sparktui.tui.screens.help import HelpScreen
from sparktui.tui.themes import load_themes

STATE_CLASSES = ("state--running", "state--stopped", "state--other")


def _luminance(rgb: tuple[int, int, int]) -> float:
    """WCAG 2.x relative luminance of an sRGB colour."""
    def lin(c: int) -> float:
        c = c / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in rgb)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(fg: tuple[int, int, int], bg: tuple[int, int, int]) -> float:
    hi, lo = sorted((_luminance(fg), _luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


# ------------------------------------------------------------------ item 8: zoom
async def test_z_zooms_the_active_pane_and_z_or_escape_restores(make_app):
    app = make_app(t=30)
    async with app.run_test(size=(200, 50)) as pilot:
        screen = app.screen
        await pilot.press("2")
        pane = screen.active_pane
        assert pane.node == "spark2"
        await pilot.press("z")
        await wait_for(pilot, lambda: screen.maximized is pane, "pane maximized")
        await pilot.pause()
        assert pane.size.width >= 190  # it fills the screen (less the maximized padding)
        assert not screen.panes[0].region  # the other pane is not shown
        await pilot.press("z")
        await wait_for(pilot, lambda: screen.maximized is None, "restored by z")
        await pilot.press("z")
        await wait_for(pilot, lambda: screen.maximized is pane, "maximized again")
        await pilot.press("escape")
        await wait_for(pilot, lambda: screen.maximized is None, "restored by escape")
        await pilot.pause()
        assert screen.panes[0].region and pane.size.width < 200


# ------------------------------------------------------------------ item 9: contrast
@pytest.mark.parametrize("theme", sorted(load_themes()))
async def test_every_container_state_is_readable_in_every_theme(make_app, theme):
    """The colour a state cell is painted in (the pane's component style, as the table gets it)
    against the containers table's background: WCAG AA for normal text, 4.5:1."""
    app = make_app(t=20, theme=theme)
    async with app.run_test(size=(120, 40)):
        assert app.theme == theme
        pane = app.screen.panes[0]
        _, bg = pane.query_one(DataTable).background_colors
        for cls in STATE_CLASSES:
            style = pane.get_component_rich_style(cls, partial=True)
            assert style.color is not None, f"{theme} {cls}: no colour"
            fg = style.color.get_truecolor()
            ratio = contrast((fg.red, fg.green, fg.blue), (bg.r, bg.g, bg.b))
            assert ratio >= 4.5, f"{theme} {cls}: {style.color.name} on {bg.hex} is {ratio:.2f}:1"


# ------------------------------------------------------------------ item 11: help, palette
async def test_help_lists_only_the_node_keys_of_this_cluster(make_app):
    app = make_app(t=30)  # the demo pair
    async with app.run_test(size=(120, 70)) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help screen")
        await pilot.pause()
        text = screen_text(app)
        assert "Node 1" in text and "Node 2" in text
        assert "Node 3" not in text and "Node 4" not in text
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), "help closed")
        # and the key does nothing rather than being listed by Textual's keys panel
        assert app.screen.check_action("select_node", (2,)) is False
        assert app.screen.check_action("select_node", (1,)) is True


async def test_palette_entries_all_carry_a_group(make_app):
    """Textual's built-in entries (Theme, Keys, Screenshot, ...) are told apart from sparktui's."""
    from textual.command import CommandList, CommandPalette

    app = make_app(t=30)
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette)
                       and app.screen.query_one(CommandList).option_count > 10, "palette entries")
        await pilot.pause()
        options = app.screen.query_one(CommandList)
        titles = [str(options.get_option_at_index(i).prompt).split("\n")[0] for i in range(options.option_count)]
        groups = {t.split(":", 1)[0] for t in titles}
        assert groups <= {"view", "node", "action", "system"}, titles
        assert "system: Theme" in titles and "system: Keys" in titles
        assert sum(t.endswith(": Quit") for t in titles) == 1  # one Quit, sparktui's


# ------------------------------------------------------------------ item 11: prompt screen
@pytest.fixture
def _state_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARKTUI_STATE_DIR", str(tmp_path / "state"))


async def test_the_prompt_screen_sets_max_tokens_and_refuses_a_bad_one(make_app, _state_dir):
    from textual.widgets import Input

    from sparktui.tui.prompt import MaxTokensModal, PromptScreen

    app = make_app(t=30)  # before the API listens: the options line needs no server
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("P")
        await wait_for(pilot, lambda: isinstance(app.screen, PromptScreen), "the prompt screen")
        screen = app.screen
        assert "max tokens server limit" in screen_text(app)
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: isinstance(app.screen, MaxTokensModal), "the max tokens box")
        await pilot.press(*"12x", "enter")
        await pilot.pause()
        assert isinstance(app.screen, MaxTokensModal)  # still open, saying why
        assert "whole number from 1" in screen_text(app)
        app.screen.query_one(Input).value = "512"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen, "back on the prompt screen")
        assert screen.max_tokens == 512 and "max tokens 512" in screen_text(app)
        await pilot.press("ctrl+l")  # Esc keeps it
        await wait_for(pilot, lambda: isinstance(app.screen, MaxTokensModal), "the box again")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, "closed")
        assert screen.max_tokens == 512
        await pilot.press("ctrl+l")  # empty: the server's limit again
        await wait_for(pilot, lambda: isinstance(app.screen, MaxTokensModal), "the box a third time")
        app.screen.query_one(Input).value = ""
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen, "closed again")
        assert screen.max_tokens is None


def test_tok_s_is_shown_only_from_16_generated_tokens():
    """One rule for the CLI printer and the TUI's stats line (ChatAnswer.shown_rate)."""
    from sparktui.commands.prompt import _stats as cli_stats
    from sparktui.probes.serving import ChatAnswer
    from sparktui.tui.prompt import _stats as tui_stats

    def answer(n: int) -> ChatAnswer:
        return ChatAnswer("m", "hi", None, "stop", ttft_s=0.2, total_s=0.3, tokens_per_s=41.5,
                          prompt_tokens=9, completion_tokens=n)

    for n, shown in ((5, False), (15, False), (16, True), (200, True)):
        assert ("tok/s" in cli_stats(answer(n))) is shown, n
        assert ("tok/s" in str(tui_stats(answer(n)))) is shown, n
    assert answer(5).to_json()["tokens_per_s"] == 41.5  # the JSON keeps the measurement


# ------------------------------------------------------------------ item 11: a load test with nothing completed
def test_a_load_test_with_nothing_completed_prints_dashes_not_zeros():
    from sparktui.actions.load_stats import RequestRecord, summarize
    from sparktui.commands.load_test import text_report

    failed = summarize([RequestRecord(index=i, start=0.0, error_kind="http", error="400 Bad Request")
                        for i in range(3)], 0.5, max_concurrency=1)
    assert failed["mean_ttft_ms"] == 0.0  # the JSON keeps vllm bench serve's shape
    report = text_report(failed, "http://127.0.0.1:1/v1", "")
    rows = [ln for ln in report.splitlines() if ln.split()[:1] in (["TTFT"], ["TPOT"], ["ITL"], ["E2EL"])]
    assert len(rows) == 4
    for ln in rows:
        assert "0.0" not in ln and ln.split()[1:] == ["–"] * 5, ln
    from sparktui.actions.load_stats import table_cells  # the TUI's table reads the same cells

    ok = summarize([RequestRecord(index=0, start=0.0, ok=True, ttft=0.05, latency=0.2, itl=[0.01, 0.01], output_tokens=3,
                                  prompt_tokens=4)], 1.0, max_concurrency=1)
    assert dict(table_cells(ok))["TTFT"][0] == "50.0"
