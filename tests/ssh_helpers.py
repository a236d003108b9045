"""ssh facts for tests, as OpenSSH's own tools state them.  tests/ is on sys.path (the rootdir
conftest's folder)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def key_fingerprint(pub: Path | str) -> str:
    """``SHA256:...`` of a public key file, as ``ssh-keygen -lf`` prints it (what sparktui must show)."""
    out = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True, check=True).stdout
    return out.split()[1]
