"""The terminal app (Textual): screens, widgets, keys and themes over the engine's state."""

import os

# Textual makes at most TEXTUAL_FPS frames a second (60 by default) and a key's repaint waits for
# the next frame slot: at 120 a key press under a 100k lines/s flood repaints in ~24 ms instead of
# ~37 (scripts/bench_ingest.py).  Frames are made only when something changed, so a quiet screen
# costs no more.  Set before Textual is first imported (the engine below never imports it); an
# operator's own TEXTUAL_FPS wins.
os.environ.setdefault("TEXTUAL_FPS", "120")
