"""Reading a Textual app under Pilot: its screen as text and a bounded wait for a condition.
Shared by tests/tui (through its conftest), tests/security and tests/e2e; tests/ is on sys.path
(the rootdir conftest's folder)."""

from __future__ import annotations

from typing import Callable


def screen_text(app) -> str:
    """What a person would see, as plain text."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


async def wait_for(pilot, cond: Callable[[], bool], what: str, rounds: int = 200) -> None:
    """Process messages until ``cond`` holds (bounded; no sleeping)."""
    for _ in range(rounds):
        if cond():
            return
        await pilot.pause()
    raise AssertionError(f"timed out waiting for {what}")
