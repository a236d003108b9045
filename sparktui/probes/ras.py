"""NCCL RAS wire client (port 28028), written here: pip NCCL wheels ship no ``ncclras`` binary.

Protocol (NVIDIA/nccl src/ras/client_support.cc; lines end in "\\n"):
    -> CLIENT PROTOCOL 2        <- SERVER PROTOCOL 2
    -> TIMEOUT <s>              <- OK
    -> SET FORMAT json          <- OK          (NCCL >= 2.28.7; older servers refuse, use text)
    -> VERBOSE STATUS           <- the report, then the server closes the connection

This file is both a module and a stdlib-only script: its source runs on a node with
``python3 -c SOURCE ras [--host H] [--port P] [--timeout S] [--format json|text]`` (RAS listens on
the node's localhost, so it is reached from the node itself, over the node's one connection).
The output is the exact wire answer, header lines included, as in fixtures/nccl-2gpu/*.ras.*.
"""

import socket
import sys
import time

DEFAULT_PORT = 28028


def _readline(sock, buf):
    while b"\n" not in buf[0]:
        chunk = sock.recv(4096)
        if not chunk:
            break
        buf[0] += chunk
    line, sep, rest = buf[0].partition(b"\n")
    buf[0] = rest
    return (line + sep).decode("utf-8", "replace")


def query(host="127.0.0.1", port=DEFAULT_PORT, timeout=5.0, fmt="json"):
    """One VERBOSE STATUS, synchronously.  Returns the wire text (or '### error' lines)."""
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        return f"### connect failed: {exc}\n"
    out = []
    buf = [b""]
    deadline = time.time() + timeout + 10
    try:
        sock.settimeout(timeout + 5)
        sock.sendall(b"CLIENT PROTOCOL 2\n")
        out.append(_readline(sock, buf))
        sock.sendall(f"TIMEOUT {int(timeout)}\n".encode())
        out.append(_readline(sock, buf))
        if fmt == "json":
            sock.sendall(b"SET FORMAT json\n")
            answer = _readline(sock, buf)
            out.append(answer)
            if not answer.startswith("OK"):
                out.append("### server refused JSON; text follows\n")
        sock.sendall(b"VERBOSE STATUS\n")
        data = buf[0]
        while time.time() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        out.append(data.decode("utf-8", "replace"))
    except socket.timeout:
        out.append("\n### (read timed out)\n")
    except OSError as exc:
        out.append(f"\n### connection error: {exc}\n")
    finally:
        sock.close()
    return "".join(out)


async def query_async(host="127.0.0.1", port=DEFAULT_PORT, timeout=5.0, fmt="json", opener=None):
    """The same exchange on asyncio-style streams: a direct connection from this process, or
    ``opener(host, port) -> (reader, writer)`` (a node's ``open_tcp``: an SSH direct-tcpip channel)."""
    import asyncio

    try:
        connect = opener(host, port) if opener is not None else asyncio.open_connection(host, port)
        reader, writer = await asyncio.wait_for(connect, timeout)
    except Exception as exc:  # OSError, timeouts, SSH channel errors: all mean "no RAS answer"
        return f"### connect failed: {exc}\n"
    out = []
    try:
        async def ask(line):
            writer.write(line.encode() + b"\n")
            await writer.drain()
            return (await asyncio.wait_for(reader.readline(), timeout + 5)).decode("utf-8", "replace")

        out.append(await ask("CLIENT PROTOCOL 2"))
        out.append(await ask(f"TIMEOUT {int(timeout)}"))
        if fmt == "json":
            answer = await ask("SET FORMAT json")
            out.append(answer)
            if not answer.startswith("OK"):
                out.append("### server refused JSON; text follows\n")
        writer.write(b"VERBOSE STATUS\n")
        await writer.drain()
        out.append((await asyncio.wait_for(reader.read(), timeout + 10)).decode("utf-8", "replace"))
    except asyncio.TimeoutError:
        out.append("\n### (read timed out)\n")
    except OSError as exc:
        out.append(f"\n### connection error: {exc}\n")
    finally:
        writer.close()
    return "".join(out)


def main(argv):
    args = list(argv[1:]) if argv and argv[0] == "ras" else list(argv)

    def opt(name, default):
        if name in args:
            i = args.index(name)
            return args[i + 1]
        return default

    sys.stdout.write(query(opt("--host", "127.0.0.1"), int(opt("--port", str(DEFAULT_PORT))),
                           float(opt("--timeout", "5")), opt("--format", "json")))
    return 0


if __name__ == "__main__" and len(sys.argv) > 1:
    sys.exit(main(sys.argv[1:]))


def source():
    """This file's text, to run on a node with ``python3 -c``."""
    with open(__file__, encoding="utf-8") as fh:
        return fh.read()
