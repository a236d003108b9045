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


def _modes(top):
    """Every folder and file below ``top`` (itself included) with its permission bits."""
    out = {top: stat.S_IMODE(os.stat(top).st_mode)}
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            out[p] = stat.S_IMODE(os.lstat(p).st_mode)
    return out


def test_everything_a_session_and_its_exports_write_is_owner_only_whatever_the_umask(tmp_path):
    """Sessions, a saved log, the prompt history and the offload worker's log hold the cluster's
    lines and commands, secrets masked at best: folders 0700, files 0600, also under umask 0."""
    from sparktui.actions.prompt import History
    from sparktui.model import Finding, FindingRaised, LogLine
    from sparktui.tui.screens.main import _write_lines

    old = os.umask(0)
    try:
        top = tmp_path / "home"  # made here: every level below is ours
        s = Session.create("c", root=top / "state" / "sparktui" / "sessions")
        s.record(LogLine("spark1", "vllm_node", "INFO serving", seq=1))
        s.record(FindingRaised(Finding(id="x", severity="info", title="t", node="spark1")))
        s.flush()
        s.close()
        _write_lines(top / "exports" / "deep" / "saved.log", ["a line"])
        History(top / "config" / "sparktui" / "prompts.jsonl").add("a prompt")
    finally:
        os.umask(old)
    modes = _modes(top)
    assert len(modes) > 10
    wrong = {p: oct(m) for p, m in modes.items() if m != (0o700 if os.path.isdir(p) else 0o600)}
    assert wrong == {}
