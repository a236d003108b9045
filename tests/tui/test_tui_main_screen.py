"""The main screen: z zooms a pane, every container state is readable in every theme, help lists
only this cluster's node keys, every palette entry carries its group."""

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


# ------------------------------------------------------------------ zoom
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


# ------------------------------------------------------------------ contrast
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


# ------------------------------------------------------------------ help, palette
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
