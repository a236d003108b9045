"""Issue 30 item 10: a session root we did not create keeps its mode (a shared 1777 folder stays 1777)."""
import os
import stat

from sparktui.session import Session


def test_existing_root_mode_is_left_alone(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o1777)
    s = Session.create("c", root=root)
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o1777
    assert stat.S_IMODE(os.stat(s.path).st_mode) == 0o700  # our own subfolder is private


def test_new_root_is_private(tmp_path):
    root = tmp_path / "new" / "sessions"
    Session.create("c", root=root)
    assert stat.S_IMODE(os.stat(root).st_mode) == 0o700
