"""Files a user hands us (bundles, capture folders, recorded sessions): read and write them safely.

A folder someone else prepared may hold planted entries: a symlink to ``/etc/shadow`` or
``/proc/self/environ`` named like a rank log, a FIFO that blocks ``open`` forever, a directory where
a file should be, a 1 GB log.  Everything here therefore

- opens with ``O_NOFOLLOW | O_NONBLOCK`` relative to a directory descriptor (so neither the entry nor
  a swapped parent directory is followed) and refuses anything ``fstat`` does not call a regular file;
- caps what is read: structured files over their limit are refused, logs over theirs are read as
  head + tail (the init lines and the last lines are what the diagnosis reads), and the result says so;
- writes through a temporary file and ``os.replace``, which replaces a planted link instead of
  writing through it.

The folder the user named is followed even when it is a symlink (they chose it); links *inside* it
are not.  Errors are ``UnsafeFile``: one line naming the path and the reason.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..units import MIB, mib

_O_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

LOG_HEAD_BYTES = 1 * MIB  # init, bootstrap, transport lines come first
LOG_TAIL_BYTES = 7 * MIB  # where it stopped comes last

# what we write (sessions, bundles) holds the operator's cluster: logs, commands, env. Owner only.
DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: str | os.PathLike) -> bool:
    """Create ``path`` (and missing parents) 0700, whatever the umask; True when it was made here.
    A folder someone else made (e.g. a shared 1777 one) keeps its mode: only ours is tightened.
    Each missing parent is made 0700 too (``mkdir(parents=True)`` would give them the umask's mode,
    and a world-writable parent lets anyone swap the private folder below it)."""
    p = Path(path)
    missing = [q for q in (p, *p.parents) if not q.exists()][::-1]
    made = False
    for q in missing:
        try:
            q.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue  # made meanwhile by someone else: theirs, its mode stays
        os.chmod(q, DIR_MODE)
        made = q == p
    return made


class UnsafeFile(Exception):
    """A file that is not read or written, with the reason (one line)."""


def open_private(path: str | os.PathLike, mode: str, **kw):
    """``open(path, mode)`` (write/append) creating the file 0600 whatever the umask, and tightening
    one that exists: sessions, exports and histories hold the operator's cluster, masked at best."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_APPEND if "a" in mode else os.O_TRUNC),
                 FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return os.fdopen(fd, mode, **kw)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def describe(kind: str) -> str:
    """An ``entries()``/``lkind()`` answer in words."""
    return {"file": "a regular file", "dir": "a directory"}.get(kind, kind)


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link (not followed)"
    if exc.errno == errno.ENOTDIR:
        return "not a directory"
    return exc.strerror or type(exc).__name__


@dataclass
class TextRead:
    text: str
    size: int  # the file's size on disk
    truncated: bool = False  # only the head and the tail were read

    @property
    def note(self) -> str:
        if not self.truncated:
            return ""
        return (f"{mib(self.size)}: read the first {mib(LOG_HEAD_BYTES)} and the last "
                f"{mib(LOG_TAIL_BYTES)} only")


class SafeDir:
    """A directory held open by descriptor; entries are opened relative to it without following links."""

    def __init__(self, path: str | os.PathLike, *, follow: bool = True, parent: "SafeDir | None" = None,
                 name: str = "") -> None:
        self.path = os.fspath(path)
        try:
            if parent is None:
                # the folder the user named: a symlink to it is their choice
                self.fd = os.open(self.path, (_O_DIR & ~os.O_NOFOLLOW) if follow else _O_DIR)
            else:
                self.fd = os.open(name, _O_DIR, dir_fd=parent.fd)
        except OSError as exc:
            why = _why(exc)
            if parent is not None and exc.errno in (errno.ENOTDIR, errno.ELOOP):
                kind = parent.lkind(name)  # Linux says ENOTDIR for a link under O_DIRECTORY|O_NOFOLLOW
                why = "a symbolic link (not followed)" if kind == "a symbolic link" else describe(kind or why)
            raise UnsafeFile(f"{self.path}: {why}") from None

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "SafeDir":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def join(self, name: str) -> str:
        return os.path.join(self.path, name)

    def sub(self, name: str) -> "SafeDir":
        return SafeDir(self.join(name), parent=self, name=name)

    def entries(self) -> dict[str, str]:
        """name -> "file" / "dir" / what else it is (a symbolic link, a FIFO, ...), never following links."""
        out: dict[str, str] = {}
        with os.scandir(self.fd) as it:
            for e in it:
                st = e.stat(follow_symlinks=False)
                if stat.S_ISREG(st.st_mode):
                    out[e.name] = "file"
                elif stat.S_ISDIR(st.st_mode):
                    out[e.name] = "dir"
                else:
                    out[e.name] = _kind(st.st_mode)
        return out

    def lkind(self, name: str) -> str | None:
        """What ``name`` is, without following it ("file", "dir", "a symbolic link", ...); None if absent."""
        try:
            st = os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise UnsafeFile(f"{self.join(name)}: {_why(exc)}") from None
        if stat.S_ISREG(st.st_mode):
            return "file"
        if stat.S_ISDIR(st.st_mode):
            return "dir"
        return _kind(st.st_mode)

    # ------------------------------------------------------------------ reading
    def _open(self, name: str) -> tuple[int, int]:
        try:
            fd = os.open(name, _O_READ, dir_fd=self.fd)
        except OSError as exc:
            raise UnsafeFile(f"{self.join(name)}: {_why(exc)}") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise UnsafeFile(f"{self.join(name)}: {_kind(st.st_mode)}, not a regular file")
        return fd, st.st_size

    def read_bytes(self, name: str, *, limit: int) -> bytes:
        """The whole file, refused when larger than ``limit`` (a structured file cut short is useless)."""
        fd, size = self._open(name)
        try:
            if size > limit:
                raise UnsafeFile(f"{self.join(name)}: {mib(size)}, over the {mib(limit)} limit")
            data = _read_upto(fd, limit + 1)  # the size may have grown since fstat
            if len(data) > limit:
                raise UnsafeFile(f"{self.join(name)}: grew past the {mib(limit)} limit while read")
            return data
        finally:
            os.close(fd)

    def read_text(self, name: str, *, limit: int) -> str:
        return self.read_bytes(name, limit=limit).decode("utf-8", "replace")

    def read_log(self, name: str, *, head: int = LOG_HEAD_BYTES, tail: int = LOG_TAIL_BYTES) -> TextRead:
        """A log as text; over ``head + tail`` bytes only its start and its end are read (memory stays bounded)."""
        fd, size = self._open(name)
        try:
            if size <= head + tail:
                data = _read_upto(fd, head + tail)
                return TextRead(data.decode("utf-8", "replace"), size)
            first = _read_upto(fd, head)
            first = first[: first.rfind(b"\n") + 1] or first  # whole lines only
            os.lseek(fd, size - tail, os.SEEK_SET)
            last = _read_upto(fd, tail)
            nl = last.find(b"\n")
            last = last[nl + 1:] if nl >= 0 else last
            skipped = size - len(first) - len(last)
            marker = f"### ... {mib(skipped)} skipped (file is {mib(size)}) ...\n".encode()
            return TextRead((first + marker + last).decode("utf-8", "replace"), size, truncated=True)
        finally:
            os.close(fd)

    def open_binary(self, name: str):
        """A buffered binary reader over a regular file (for streaming large files line by line)."""
        fd, _ = self._open(name)
        return os.fdopen(fd, "rb")

    def count_lines(self, name: str) -> int:
        """Lines in a file of any size without holding it: streamed in 1 MiB reads."""
        fd, _ = self._open(name)
        try:
            n, last = 0, b"\n"
            while chunk := os.read(fd, MIB):
                n += chunk.count(b"\n")
                last = chunk[-1:]
            return n + (last != b"\n")
        finally:
            os.close(fd)

    # ------------------------------------------------------------------ writing
    def mkdir(self, name: str) -> "SafeDir":
        """A sub-directory, created 0700 when missing; a planted link or file in its place is refused.
        One that was already there keeps its mode (it is not ours to change)."""
        try:
            os.mkdir(name, DIR_MODE, dir_fd=self.fd)
            made = True
        except FileExistsError:
            made = False
        except OSError as exc:
            raise UnsafeFile(f"{self.join(name)}: {_why(exc)}") from None
        sub = self.sub(name)
        if made:
            os.fchmod(sub.fd, DIR_MODE)  # through the descriptor opened without following links
        return sub

    def write(self, name: str, data: bytes | str) -> None:
        """Write ``name`` through a fresh temporary file and ``os.replace``: an existing entry (a planted
        link included) is replaced, never written through."""
        if isinstance(data, str):
            data = data.encode("utf-8", "surrogateescape")
        if self.lkind(name) == "dir":
            raise UnsafeFile(f"{self.join(name)}: a directory is in the way")
        tmp = f".{name}.{os.getpid()}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE,
                         dir_fd=self.fd)
        except OSError as exc:
            raise UnsafeFile(f"{self.join(tmp)}: {_why(exc)}") from None
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError as exc:
            try:
                os.unlink(tmp, dir_fd=self.fd)
            except OSError:
                pass
            raise UnsafeFile(f"{self.join(name)}: {_why(exc)}") from None


def _read_upto(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left > 0:
        b = os.read(fd, min(left, 1 * MIB))
        if not b:
            break
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def read_file(path: str | os.PathLike, *, limit: int) -> bytes:
    """One file the user named: its folder is followed, the file itself is not."""
    head, name = os.path.split(os.fspath(path))
    with SafeDir(head or ".") as d:
        return d.read_bytes(name, limit=limit)
