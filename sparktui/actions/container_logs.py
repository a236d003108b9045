"""Follow a container's log from a thread (the docker SDK blocks) into an asyncio queue.

Each pump puts ``(key, [lines])`` batches and, when the log ends (the container exited or the
stream closed), ``(key, None)``.  ``stop()`` closes the stream from the caller's thread, which the
SDK's CancellableStream allows, so no thread outlives the action waiting for a next chunk.
"""

from __future__ import annotations

import asyncio
import threading


class LogPump:
    def __init__(self, client, container: str, key: str, queue: asyncio.Queue, *, since: int | None = None) -> None:
        self.client, self.container, self.key, self.queue = client, container, key, queue
        self.since = since
        self._loop = asyncio.get_running_loop()
        self._stop = threading.Event()
        self._stream = None
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"logs-{key}")

    def start(self) -> "LogPump":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        stream = self._stream
        if stream is not None and hasattr(stream, "close"):
            try:
                stream.close()
            except Exception:  # already closed by the daemon's end of stream
                pass

    def _put(self, item) -> None:
        try:
            self._loop.call_soon_threadsafe(self.queue.put_nowait, (self.key, item))
        except RuntimeError:  # the loop is gone: the action ended
            pass

    def _run(self) -> None:
        buf = b""
        try:
            kw = {"since": self.since} if self.since else {}
            self._stream = self.client.api.logs(self.container, stream=True, follow=True, **kw)
            for chunk in self._stream:
                if self._stop.is_set():
                    break
                buf += chunk
                *lines, buf = buf.split(b"\n")
                if lines:
                    self._put([line.decode("utf-8", "replace") for line in lines])
        except Exception:  # the container went away or the connection dropped: the log ends here
            pass
        if buf and not self._stop.is_set():
            self._put([buf.decode("utf-8", "replace")])
        if not self._stop.is_set():
            self._put(None)
