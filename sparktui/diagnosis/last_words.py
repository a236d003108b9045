"""How a log ended: its last words, read for structure at end of input (never per log line).

A failing process leaves a recognisable shape at the end of its log even when no catalogue entry
knows its wording: an exception line (``pkg.Class: message``), a line its logger printed at
ERROR/CRITICAL/FATAL, a non-zero exit status, or a death (killed, a fatal signal, a core dump, a
process reported dead).  ``failure`` finds that shape in the last lines of a source; ``facts``
reads the same window for structural facts that name a catalogue cause whatever the wording
(an errno of a socket call, getaddrinfo's failure, the driver's own out-of-memory status, an
undefined symbol, a missing operator, a dtype the GPU lacks, shared memory that ran out, an NCCL
WARN by the transport that printed it: verbs/NET/IB, SHM, sockets);
``component`` says which layer spoke (the diagnoser adds the phase, from the milestones and
end_phases.toml).

A death printed after a shutdown request (SIGTERM/SIGINT, Ctrl+C, "shutting down") is how a stop
looks, not a failure: ``shutdown_before`` finds such a request earlier in the window.  A traceback
a logger printed at WARNING, after which the program logged on, was caught and handled: not the
last words either.  A log whose very last line is an NCCL WARN stops at NCCL's complaint.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Iterable, Iterator, Sequence

from . import lineprefix
from .exc_shapes import parse as parse_exception
from .tracebacks import CHAIN

# lines kept per source for this reading (the classifier's tail is shorter: it is evidence); a
# fact can sit above a 50-line traceback and its teardown, or above an environment report pasted
# after the log (torch's collect_env prints about 75 lines)
WINDOW = 120
# the failure must be among this many last non-blank lines: "last words", not something handled
# long before the log went on
LAST = 10
MAX_BODY = 2000

_BAD_LEVELS = frozenset({"ERROR", "CRITICAL", "FATAL"})
_QUIET_LEVELS = frozenset({"INFO", "DEBUG", "WARNING", "WARN"})
_WARN_LEVELS = frozenset({"WARNING", "WARN"})
# torch c10d's own warning/info lines ("[W socket.cpp:401] ...", "[rank0]:[W1129 19:11:59.7 x.cpp:1] ..."):
# a socket call that failed and was retried another way (IPv6 first, then IPv4) is no failure
_QUIET_BRACKET = re.compile(r"(?:^|\]:|\s)\[[WI](?:\d{3,4} \d\d:\d\d:\d\d[.\d]*)? [\w./-]+:\d+\]")
# error marks inside a line: glog-style severity letters in brackets as torch's c10d and Ray's core
# print them, NCCL's non-zero return-code trace, MPI's fatal handler
_ERROR_MARK = re.compile(
    r"(?:^|\]:)\[(?P<lvl>[EF])(?:\d{3,4} \d\d:\d\d:\d\d[.\d]*)? [\w./-]+:\d+\]"  # torch c10d "[E socket.cpp:610]"
    r"|\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [EFC] \d+ \d+\]"  # Ray's core "[2025-07-23 10:06:19,681 E 51000 51000]"
    # a C++ runtime's "[Component][ERROR]" anywhere in the line (TensorRT-LLM, Triton backends)
    r"|\[[\w. -]{1,30}\]\[(?:ERROR|FATAL|CRITICAL)\]"
    # a C library's own "file.c:123 TAG ERROR" (UCX, libfabric, NCCL-style tags other than NCCL's WARN)
    r"|\b[\w.-]+\.(?:c|cc|cpp|cu|h|hpp):\d+\s+[A-Z][A-Z0-9]{1,10}\s+(?:ERROR|FATAL)\b"
    # the GPU driver's Xid event (a GPU or driver fault, whatever its number)
    r"|\bNVRM: Xid\b"
    # a non-zero ncclResult_t passed back up to the communicator's init, group, proxy or enqueue
    # ("init.cc:1548 -> 2"); a plugin's probe failing (net.h -> 2) is retried or falls back: not fatal
    r"|\b(?:NCCL )?INFO (?:[\w-]+/)?(?:init|group|enqueue|proxy|bootstrap|transport)\.(?:cc|cu):\d+ -> [1-9]\d*\b"
    # ... or up through the net transport's connection setup (transport/net.cc), which runs once the
    # plugin is chosen: a plugin's own probe (net_ib.cc, net.h) never passes through it
    r"|\b(?:NCCL )?INFO transport/(?:net|p2p|shm)\.cc:\d+ -> [1-9]\d*\b"
    # Tornado's and Jupyter's record header at its error level ("[E 2024-01-01 10:00:00.123 ServerApp]")
    r"|^\[[EFC] \d{2,4}-?\d\d-?\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? [\w.:-]{1,60}\]"
    # MPI's fatal error handler (Open MPI, MPICH) aborting the job
    r"|\bMPI_ERRORS_ARE_FATAL\b|\bMPI_ABORT was invoked\b|\*\*\* An error occurred in MPI_\w+"
    r"|\b(?:Test )?NCCL failure\b"
)
# a C library's status enum that is a failure, on a line of any wording: NCCL's ncclResult_t, the
# CUDA runtime's and driver's, the CUDA libraries' *_STATUS_*, HIP's, MPI's, the GPU driver's NV_ERR_*,
# NVML's (not NOT_SUPPORTED: how a GB10 answers every memory query); and a failed C call: "f(...)
# failed", "connect() to host failed", "Call to ibv_x failed", nccl-tests' "Cuda failure file.cu:N"
_STATUS = re.compile(
    r"\bnccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError)\b"
    # (not a status that says nothing failed: polled for, peer access already set up)
    r"|\bCUDA_ERROR_(?!NOT_READY\b|PEER_ACCESS_(?:ALREADY_ENABLED|NOT_ENABLED)\b)[A-Z_]{3,}\b"
    r"|\bcudaError(?!Success\b|NotReady\b|PeerAccess(?:AlreadyEnabled|NotEnabled)\b)[A-Z]\w+"
    r"|\b(?:CUBLAS|CUDNN|CUSPARSE|CUSOLVER|CUFFT|CURAND|CUTENSOR|NVJPEG)_STATUS_(?!SUCCESS\b)[A-Z_]+"
    r"|\bhipError(?!Success\b|NotReady\b)[A-Z]\w+|\bMPI_ERR_[A-Z_]+|\bNV_ERR_[A-Z_]+"
    r"|\bNVML_ERROR_(?!NOT_SUPPORTED\b)[A-Z_]+"
    r"|\b[A-Za-z_]\w{1,60}\([^()\n]{0,120}\)(?: (?:to|on|for|with|of) [^\s()]{1,120})?:? (?:failed|returned (?:error|-?[1-9]\d*))\b"
    r"|\bCall to \w+ failed\b"
    r"|\b(?:Cuda|CUDA|NCCL|NVML|MPI|HIP|cuDNN|cuBLAS) (?:failure|error) (?:\d+ )?(?:at |in )?[\w./-]+\.(?:c|cc|cpp|cu|h|hpp)[:(]\d+"
)
# the cheap gate of _STATUS (one of these is in every line it matches)
_STATUS_GATE = ("nccl", "CUDA_ERROR_", "cudaError", "_STATUS_", "hipError", "MPI_ERR_", "NV_ERR_", "NVML_ERROR_",
                ") failed", ") returned", "failed", "failure", "error ")
# a line NCCL printed at its own INFO level (a retried call, a probe): never a failure by itself
# (NCCL before 2.3 printed no "NCCL" word: "host:pid:tid [0] INFO ...")
_NCCL_QUIET = re.compile(r"\bNCCL (?:INFO|TRACE)\b|^[\w.-]+:\d+:\d+ \[\d+\] (?:INFO|TRACE) ")
# a level word leading the message ("ERROR: ...", "[ERROR] ...", "FATAL ...", "Error: ...")
_LEVEL_WORD = re.compile(
    r"^\[?(?P<lvl>ERROR|FATAL|CRITICAL|Error|Fatal|fatal error)\]?[:\s]"
    # spdlog's and nginx's bracketed lowercase level ("[error] ...", "[critical] ...")
    r"|^\[(?:error|critical|fatal|emerg|alert|crit)\]\s"
    # ... after a component's tag ("[sgl_kernel] CRITICAL: ...", "[worker-0] FATAL: ...", "[llama] error: ...",
    # Ray's "(autoscaler +21m12s) Error: ...")
    r"|^(?:\[[\w.@/:-]{1,40}\] ?|\([\w.@/:+ -]{1,40}\) ?){1,2}"
    r"(?:\[?(?:ERROR|FATAL|CRITICAL)\]?:?\s|(?:Error|Fatal|error|fatal):\s|\[(?:error|critical|fatal)\]\s)"
    # a program's or function's own "name: error: ..." (argparse, GNU tools, C libraries' "func: failed to")
    # (capitalised too: "nvidia-smi: Unable to determine the device handle for GPU ...: Unknown Error";
    # not after a lower level's word: "Warning: unable to ...")
    # (a Windows path as the tag too: "d:\a\src\ggml-cuda\mmv.cu:57: ERROR: ...")
    r"|^(?!(?:Warning|WARNING|Warn|WARN|Note|NOTE|Info|INFO|Hint|Notice|Tip|Debug|DEBUG):)(?:[\w.:/\\-]{1,200}: ){1,2}"
    r"(?:(?:initiali[sz]ation|internal|runtime|fatal) )?(?:error|fatal|ERROR|FATAL|[Ff]ailed to|[Uu]nable to|[Cc]annot)\b"
    # TensorRT's error record without its logger's tag: "4: [runtime.cpp::...::50] Error Code 4: Internal Error (...)"
    r"|^(?:\d{1,3}: )?\[[^\]\n]{1,300}\] Error Code \d{1,3}: "
    # a compiler driver's padded level ("ptxas fatal   : ...", "nvcc fatal   : ...")
    r"|^[\w.+-]{1,40} (?:fatal|error)\s+: "
    # "<subsystem> error: ..." ("CUDA error: ...", "Runtime error: ...")
    r"|^(?:[\w.-]{1,30} ){1,3}(?:error|ERROR)(?: \d+)?: "
    # a C/C++ library's message under its source location ("/opt/nvshmem/src/.../ibgda.cpp:1889: NULL
    # value cannot allocate mlx5dv_devx_uar"): a check of its own that failed
    r"|^[\w./\\-]{1,200}\.(?:c|cc|cpp|cxx|cu|h|hpp):\d+:(?:\d+:)? (?=[^\n]{0,120}?\b(?:cannot|can't|could not|failed|unable to)\b)"
    # an assertion that failed (C/C++ assert, GGML_ASSERT, a runtime's own checks)
    r"|\bAssertion\b.{0,200}\bfailed\b|\bGGML_ASSERT\b|^Assertion failed"
    # a shell's or the kernel's refusal to start a program ("exec /bin/sh: exec format error")
    r"|^[\w./ -]{1,120}: (?:exec format error|command not found|Permission denied|cannot execute binary file)"
    # the lowercase level of command-line tools (git's "fatal: ...", pip's and setuptools' "error: ...")
    r"|^(?P<lvl2>error|fatal):\s"
    # the Docker CLI relaying the daemon's refusal ("docker: Error response from daemon: ...")
    r"|^(?:[\w.-]{1,40}: )?Error response from daemon:?\s*"
    # a localised program's error level (Chinese, Japanese, Korean, with a full-width colon or not)
    r"|^(?:\[|【)?(?:错误|錯誤|致命错误|严重错误|エラー|致命的なエラー|오류|에러)(?:\]|】)?\s*[:：]\s*"
)
# a build toolchain's own failure lines, read whole (the file and the tool are the message): CMake,
# a C/C++/CUDA compiler ("x.cpp:12:5: error:", nvcc's "x.cu(12): error:"), ninja and make giving up
_TOOLCHAIN = re.compile(
    r"^CMake Error\b"
    r"|^\S+\.(?:c|cc|cpp|cxx|cu|cuh|h|hh|hpp|hxx)(?::\d+){1,2}: (?:fatal )?error: "
    r"|^\S+\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp)\(\d+\): (?:catastrophic )?error: "
    r"|^ninja: build stopped\b|^ninja: error: |^FAILED: \S"
    r"|^g?make(?:\[\d+\])?: \*\*\* .{0,300}\bError \d+"
)
# structured loggers: JSON ("level":"error") and logfmt (level=error)
_STRUCTURED = re.compile(r'(?i)"(?:level|severity|lvl)"\s*:\s*"(?:error|err|fatal|critical|panic)"|\blevel=(?:error|fatal|panic)\b')

# a process's exit status: "exit code 1", "exited with code 137", "exit status 2", "returncode=1",
# "returned non-zero exit status 1", "exitcode: -9"
_EXIT = re.compile(
    r"(?i)\b(?:exit(?:ed)?(?: with)?(?: (?:exit|return))? ?(?:code|status)|return ?code|exitcode|exit_code"
    r"|returned non-zero exit status)\s*[:=]?\s*\(?(?P<code>-?\d+)\b"
)
# an exit status without its number, or systemd's: "returned a non-zero exit code", "code=exited,
# status=1/FAILURE", "Failed with result 'exit-code'"
_EXIT_WORDS = re.compile(r"\bnon-zero (?:exit|return) (?:code|status)\b|\bcode=exited, status=[1-9]\d*\b"
                         r"|\bFailed with result '(?:exit-code|signal|core-dump|oom-kill)'")
# what a container's manager shows of one that failed: `docker ps`'s STATUS column with a non-zero
# code, Kubernetes restarting it again and again; structure alone (a listing can show an old container)
_MANAGER_SAYS = re.compile(r"\bExited \((?:-?[1-9]\d*)\) \S|\bCrashLoopBackOff\b|\bBack-off restarting failed container\b")
# a process death: the kernel's or the shell's words, a fatal signal by name or number, a core dump
_DEATH_WORDS = (
    r"\bSegmentation fault\b|\bcore dumped\b|\bBus error\b|\bIllegal instruction\b"
    r"|\bterminate called after throwing\b|\b(?i:SIG(?:KILL|SEGV|ABRT|BUS|ILL|FPE|QUIT))\b"
    # glibc's heap checks abort the process
    r"|\b(?:free|malloc|realloc|munmap_chunk)\(\): \w|\bdouble free or corruption\b"
    r"|\b(?:killed|terminated) by signal\b|\bsignal (?:6|7|9|11)\b|\bsignal: (?:killed|aborted|segmentation fault)\b"
    r"|\bdied (?:unexpectedly|with|abnormally)|\bis (?:already )?dead\b|\bhas died\b|\bwas killed\b"
    r"|\b(?:been |was )?marked (?:as )?dead\b"
    # systemd's report of a unit's main process killed by a fatal signal
    r"|\bcode=(?:killed|dumped), status=(?:6|7|9|11)\b"
)
# deaths inferred from words alone (no signal, no level): a process that ended on its own when
# nobody asked it to ("Termination is unexpected"), the kernel's OOM killer (dmesg, journald's kernel
# lines); read as last words, but as structure alone (``LastWords.weak``: a warning)
_DEATH_INFERRED = (
    r"\b(?:terminated|exited|stopped|crashed|quit) unexpectedly\b|\b[Tt]ermination is unexpected\b"
    # (older kernels: "Kill process 62685 (bash) score 0 or sacrifice child")
    r"|\bKill(?:ed)? process \d+\b|\boom-kill(?:er)?\b|\boom_reaper\b"
)
_DEATH = re.compile(rf"(?:^Killed\b|\bKilled\s*$|^Aborted(?!\s+\w)|{_DEATH_WORDS}|{_DEATH_INFERRED})")
# the deaths a line says by itself (a signal, a core dump, the shell's "Killed"): an error
_DEATH_SPOKEN = re.compile(rf"(?:^Killed\b|\bKilled\s*$|^Aborted(?!\s+\w)|{_DEATH_WORDS})")
# a stop that someone asked for: what follows it (workers torn down, an engine "dead") is the stop
_SHUTDOWN = re.compile(
    # (not Python source naming the constant, "loop.add_signal_handler(signal.SIGINT," quoted by a traceback)
    r"(?i)(?:(?<!signal\.)\bSIG(?:TERM|INT)\b|\bsignal (?:15|2)\b|\bKeyboardInterrupt\b|\bCtrl\+?-?C\b|^\^C"
    r"|\bshutting down\b|\bshutdown (?:requested|triggered|signal|initiated|complete)|\[shutdown\]"
    r"|\bgraceful(?:ly)? (?:shutdown|stop|exit)|\bstopping (?:the )?(?:server|engine|worker)s?\b"
    r"|^Stopping [\w@.-]+\.service\b)"  # systemd stopping a unit
)
_TRACEBACK = re.compile(r'Traceback \(most recent call last\)|^File "[^"]+", line \d+')

# the layer that spoke, most specific first: the words of the failure line, then the lines (and
# traceback frames) just above it
_COMPONENTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("NCCL", re.compile(r"\bNCCL\b|\bnccl\w*|ProcessGroupNCCL|pynccl")),
    ("Gloo", re.compile(r"(?i)\bgloo\b")),
    ("CUDA driver", re.compile(r"\bNVRM\b|\bNV_ERR_\w+|\bcuda(?:Error\w*|Malloc\w*)|\bCUDA\b|\bCUresult\b|\bcuInit\b|libcuda")),
    ("TensorRT-LLM", re.compile(r"(?i)tensorrt_llm|\bTRT-?LLM\b|TensorRT")),
    ("SGLang", re.compile(r"(?i)\bsglang\b|^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: DP\d+)? TP\d+\]")),
    ("Ray", re.compile(r"\bray[./]|\bray::|\braylet\b|\bRay\b|RayWorker|\bGCS\b"
                       r"|^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [TDIWEFC] \d+ \d+\] [\w.]+\.cc:\d+:")),
    ("transformers", re.compile(r"\btransformers[./]|huggingface_hub|\bAutoConfig\b|\bAutoTokenizer\b")),
    ("torch.distributed", re.compile(r"torch[./]distributed|\bc10d\b|\btorchrun\b|\brendezvous\b")),
    ("vLLM engine", re.compile(r"(?i)\bvllm\b|\bEngineCore\w*|\bAPIServer\b|VllmWorker|\bWorkerProc\b")),
    ("llama.cpp", re.compile(r"\bggml\w*|\bllama_\w+|llama\.cpp")),
)

# the components that are an inference engine (a death there is the engine's death)
ENGINES = frozenset({"vLLM engine", "SGLang", "TensorRT-LLM"})


@dataclass(frozen=True)
class LastWords:
    line: int
    text: str
    kind: str  # "exception" | "error line" | "non-zero exit" | "process death" | "traceback"
    exc_class: str
    message: str
    # a death its logger reported below error level (Ray's core at I/W, a warning): the last words,
    # but the logger did not call it an error (reported as a warning)
    quiet: bool = False
    # read from structure alone: no catalogue pattern, no Python exception or traceback, no level
    # field of its own at ERROR/FATAL/CRITICAL (a C status enum, a failed C call, a death inferred
    # from words, NCCL's WARN before a paste, a level found only under a peeled prefix): weaker
    # evidence, reported as a warning (a healthy log can carry such a line and go on)
    weak: bool = False


# prefixes the hot path's lineprefix does not read, peeled here (end of input, the window only): a
# launcher's bracketed name ("[vllm]: ", never a level), horovodrun's "[1]<stderr>:", a bare time of
# day ("09:14:37 "); then lineprefix reads what follows them (a rank, an actor, a logger's header)
_MORE_PREFIX = re.compile(
    r"^(?:\[\d{1,5}(?:,\d{1,5})?\]<std(?:out|err)>: ?"
    r"|\[(?!(?:ERROR|FATAL|CRITICAL|WARN|WARNING|INFO|DEBUG|[EFWI])\])[\w.@-]{1,64}\]: ?(?=\S)"
    r"|\d\d:\d\d:\d\d(?:[.,]\d{1,9})? +(?=\S))"
)
# after such a prefix, a level word leading the message ("09:14:37 INFO ...")
_LEAD_LEVEL = re.compile(r"^(?P<lvl>INFO|DEBUG|WARNING|WARN|ERROR|CRITICAL|FATAL)\b:? ")
# a prefix with no message after it (a Ray/vLLM actor's, a compose service's): a blank line
_BARE_PREFIX = re.compile(r"^(?:\([^()\n]{0,160}?\b(?:pid|ip)=[^()\n]{0,160}?\)|[\w.-]{1,64}\s+\|)$")


def _body(text: str, lead: bool = True) -> tuple[str, str]:
    """(logger level, message body) of a raw line.  ``lead``: a level word that leads the message
    once a prefix is peeled ("09:14:37 INFO ...") is its level (without it: only a logger's header)."""
    sig, body = lineprefix.split(lineprefix.clean(text[:MAX_BODY]))
    parts = sig.split("|")
    level = parts[1] if len(parts) > 1 else ""
    if body[:1] in "[0123456789(" or body[-1:] in ")|":
        peeled = False
        for _ in range(3):
            m = _MORE_PREFIX.match(body)
            if m is None:
                break
            peeled = True
            sig2, body = lineprefix.split(body[m.end():])
            parts = sig2.split("|")
            level = (parts[1] if len(parts) > 1 else "") or level
        if lead and peeled and not level and (w := _LEAD_LEVEL.match(body)) is not None:
            level = w["lvl"]
        if _BARE_PREFIX.match(body.strip()):
            return level, ""
    return level, body.strip()


# the exception shapes that are no Python exception (a C++ what(), an engine's error, a Go/Rust panic)
NOT_PYTHON = frozenset({"what()", "EngineError", "panic"})


def _spoken(text: str, kind: str, cls: str) -> bool:
    """Whether a line's failure (``read_line``'s kind and class) rests on what the line says
    itself: read without the structural readings and without peeling the extra prefixes (an
    exception, an exit status, a fatal signal, an error level), or, once peeled, a Python exception
    or a logger's own header at an error level.  Otherwise it is structure alone (``LastWords.weak``)."""
    sig, body = lineprefix.split(lineprefix.clean(text[:MAX_BODY]))
    parts = sig.split("|")
    if read_line((parts[1] if len(parts) > 1 else ""), body.strip(), inferred=False) is not None:
        return True
    level, body = _body(text, lead=False)
    if level in _BAD_LEVELS:
        return True
    return kind == "exception" and cls not in NOT_PYTHON and read_line(level, body, inferred=False) is not None


def _nonblank(window: Sequence[tuple[int, str]]) -> list[tuple[int, str, str, str]]:
    out = []
    for n, t in window:
        level, body = _body(t)
        if body:
            out.append((n, t, level, body))
    return out


def read_line(level: str, body: str, inferred: bool = True) -> tuple[str, str, str] | None:
    """(kind, class, message) when one line says a process failed, else None.  ``inferred``: also
    the readings of structure alone (a C status enum or a failed C call, a death inferred from its
    words); without it, only what a line says by itself (an exception, an exit status, a fatal
    signal, an error level)."""
    if level in _QUIET_LEVELS:
        return None  # logged below error level: something was handled or reported, not fatal
    if is_shutdown_request(body):
        return None
    exc = parse_exception(body)
    if exc is not None:
        cls, msg = exc
        if cls.endswith(("KeyboardInterrupt", "SystemExit", "StopIteration")):
            return None
        return "exception", cls, msg
    m = _EXIT.search(body)
    if m is not None:
        return ("non-zero exit", "", body) if m.group("code") not in ("0", "-0") else None
    if _EXIT_WORDS.search(body):
        return "non-zero exit", "", body
    if (_DEATH if inferred else _DEATH_SPOKEN).search(body):
        return "process death", "", body
    if inferred and _MANAGER_SAYS.search(body):
        return "non-zero exit", "", body
    g = _ERROR_MARK.search(body)
    if level in _BAD_LEVELS or g is not None or _STRUCTURED.search(body):
        return "error line", "", body
    if inferred and any(x in body for x in _STATUS_GATE) and _STATUS.search(body) and not _NCCL_QUIET.search(body) \
            and not _QUIET_BRACKET.search(body):
        return "error line", "", body
    if _TOOLCHAIN.match(body):
        return "error line", "", body
    w = _LEVEL_WORD.match(body)
    if w is not None:
        return "error line", "", body[w.end():].lstrip(":").strip() or body
    return None


# what a process prints while it is torn down, after whatever ended it: Python's warnings (the
# "file.py:N: XWarning: ..." line, then the source line it quotes), the multiprocessing resource
# tracker's leak notice, torch's process-group destructor warning, an NCCL communicator destroyed or
# aborted, an ASGI server's shutdown lines, the interpreter's "sys:1: ResourceWarning"
_PYWARN = re.compile(r"^(?:[\w./\\:-]+\.py:\d+: |sys:1: )(?:[A-Z]\w*)?Warning: ")
_TEARDOWN = re.compile(
    r"\bresource_tracker\b|\bleaked (?:shared_memory|semaphore) objects?\b"
    r"|\bprocess group has NOT been destroyed\b|^destroy_process_group\b"  # (and its wrapped line)
    r"|\b(?:Destroy|Abort) COMPLETE\b"
    r"|^(?:Waiting for application shutdown|Application shutdown complete|Finished server process)\b"
)
# a block Python prints for an exception it could not raise: in a destructor or an atexit handler,
# while the interpreter shuts down; its traceback is not how the process ended
IGNORED_HEAD = re.compile(r"^(?:Exception ignored in\b|Error in atexit\._run_exitfuncs:)")


def teardown(lines: list[tuple[int, str, str, str]]) -> set[int]:
    """Line numbers of teardown noise among ``lines`` (_nonblank's rows): lines printed while the
    process was shut down, which say nothing about why; an ignored exception's whole block."""
    out: set[int] = set()
    k = 0
    while k < len(lines):
        n, _t, _, body = lines[k]
        if IGNORED_HEAD.match(body):
            end = next((j for j in range(k + 1, min(len(lines), k + 80))
                        if parse_exception(lines[j][3]) is not None), k)
            out.update(x[0] for x in lines[k:end + 1])
            k = end + 1
            continue
        if _PYWARN.match(body):
            out.add(n)
            # the warning's quoted source line follows it, indented ("  warnings.warn(...)")
            nxt = lines[k + 1] if k + 1 < len(lines) else None
            if nxt is not None and (nxt[1][:1] in (" ", "\t") or nxt[3].startswith("warnings.warn(")) \
                    and not _TRACEBACK.search(nxt[3]) and parse_exception(nxt[3]) is None:
                out.add(nxt[0])
                k += 1
        elif _TEARDOWN.search(body) and parse_exception(body) is None:  # never an exception's own line
            out.add(n)
        k += 1
    return out


# what a terminal adds after the log when it is copied: a shell's prompt (with or without a command
# typed at it), the echo of Ctrl+C alone
_PROMPT = re.compile(r"^(?:\([\w.-]{1,64}\) )?(?:[\w.-]{1,64}@[\w.-]{1,64}(?::[^\s$#%]{0,200})?\s?[$#%]"
                     r"|\[[\w.-]{1,64}@[\w.-]{1,64}[^\]]{0,200}\][$#]|\$|PS [A-Z]:\\[^>]{0,200}>|[A-Z]:\\[^>]{0,200}>)"
                     r"(?: .*)?$")
CTRL_C = "^C"
_INTERRUPTED = re.compile(r"^(?:\^C)?(?:[\w.]+\.)?KeyboardInterrupt\b")


# the markup around a log pasted into an issue or a forum post: a code fence, a collapsed section
_MARKUP = re.compile(r"^(?:```[\w+-]*|~~~[\w+-]*|</?details>|<summary>.{0,200}</summary>|</?pre>|\[/?code\])$", re.I)


def terminal_residue(text: str) -> bool:
    """A line the terminal (or the post it was pasted into) added after the log: blank, a shell
    prompt, a lone ^C, a code fence or a collapsed section's tag."""
    body = lineprefix.clean(text).strip()
    return not body or body == CTRL_C or _PROMPT.match(body) is not None or _MARKUP.match(body) is not None


def before_interrupt(window: Sequence[tuple[int, str]]) -> tuple[list[tuple[int, str]], int] | None:
    """(the window before it, its first line) when the log ends in a person's Ctrl+C: the echoed
    ^C, Python's KeyboardInterrupt and its traceback, the prompt back; None otherwise.  What the
    process printed before it is what it was doing (or failed with) when the person gave up."""
    k = len(window)
    while k and terminal_residue(window[k - 1][1]):
        k -= 1
    j = k - 1
    if j < 0:
        return None
    last = lineprefix.body(lineprefix.clean(window[j][1])).strip()
    if not _INTERRUPTED.match(last) and not (k < len(window) and any(
            lineprefix.clean(t).strip() == CTRL_C for _, t in window[k:])):
        return None
    if _INTERRUPTED.match(last):
        # up its traceback: frames, their source lines (indented), the chain's joints
        while j > 0:
            prev = window[j - 1][1]
            body = lineprefix.body(lineprefix.clean(prev))
            b = body.strip()
            if not b or prev[:1] in " \t" or _TRACEBACK.search(b) or b.startswith(CHAIN) or set(b) <= {"^", "~", " "}:
                j -= 1
                if body.lstrip().startswith(("Traceback", "^CTraceback")):
                    break
                continue
            break
    first = window[j][0]
    cut = list(window[:j])
    while cut and terminal_residue(cut[-1][1]):
        cut.pop()
    return (cut, first) if cut else None


# what a report pasted after a log is made of: rules and section heads, "Key    : value" rows with a
# padded key (torch's and vLLM's collect_env), "[pip3] x==1" / "[conda] x" rows, "pkg==1.2" (pip
# freeze), table rows ("| ... |", nvidia-smi), and its own heads ("Versions of relevant libraries:")
_REPORT_ROW = re.compile(r"^(?:[=\-+*#~_]{5,}|\|.*\||[+|][=\-+|]{5,}[+|]?)$"
                         r"|^[^:\n]{1,60}?\S\s{2,}:(?:\s|$)|^[^:\n]{1,60}:\s{2,}\S"
                         r"|^\[(?:pip\d?|conda)\] \S"
                         r"|^[A-Za-z0-9][\w.-]{0,80}(?:==|===)[\w.!+-]{1,40}$"
                         r"|^[A-Z][\w ()/.-]{2,60}:$")
REPORT_MIN = 4
_REPORT_KEY = re.compile(r"^[A-Za-z_][\w .()/+-]{1,60}: \S.{0,300}$|^[A-Z][\w ()/.-]{2,60}:$")
_REPORT_OPEN = re.compile(r"^Collecting environment information\b")


def before_report(window: Sequence[tuple[int, str]]) -> tuple[list[tuple[int, str]], int] | None:
    """(the window before it, its first line) when the log ends in a report pasted after it: rows
    of a report at the margin (``_REPORT_ROW``, at least ``REPORT_MIN``; with them its plain "Key:
    value" rows, blank lines, the terminal's residue) up to its opening line; None otherwise.  A line that says a
    process failed is never part of a report."""
    k = len(window)
    rows = 0
    while k:
        text = window[k - 1][1]
        if terminal_residue(text):
            k -= 1
            continue
        body = lineprefix.body(lineprefix.clean(text)).rstrip()
        if _REPORT_OPEN.match(body):
            k -= 1
            break
        if body[:1].isspace():
            break  # indented: a program's own listing (torchelastic's launch config), not a pasted report
        strong = _REPORT_ROW.match(body) is not None
        if not (strong or _REPORT_KEY.match(body)) or read_line(*_body(text)) is not None:
            break
        rows += strong
        k -= 1
    if rows < REPORT_MIN or k == 0:
        return None
    return list(window[:k]), window[k][0]


def failure(window: Sequence[tuple[int, str]]) -> LastWords | None:
    """The failure among the last ``LAST`` non-blank lines of ``window`` (nearest the end first
    for deaths and exits, which are what ended the process; the earliest exception of those lines
    otherwise: its message is the cause, what follows it is the teardown), or None.  A death or an
    error after a shutdown request is no failure.  Teardown noise (``teardown``) does not count
    among those lines: what ended the process came before it."""
    lines = _nonblank(window)
    noise = teardown(lines)
    if noise:
        lines = [x for x in lines if x[0] not in noise]
    last = _before_native_stack(lines)[-LAST:]
    handled = _handled_tracebacks(lines)
    # the readings a line makes by what it says itself (an exception, an exit status, a fatal
    # signal, an error level, as read before any structural reading), and those of structure alone
    # (``LastWords.weak``): a line of the first kind wins over any of the second, wherever it is
    found: LastWords | None = None
    weak: LastWords | None = None
    for n, t, level, body in last:
        if n in handled:
            continue
        got = read_line(level, body)
        if got is None:
            continue
        kind, cls, msg = got
        if not _spoken(t, kind, cls):
            if weak is None or (weak.kind != "exception" and kind == "exception"):
                weak = LastWords(n, t.strip(), kind, cls, msg, weak=True)
            continue
        if found is None or (found.kind != "exception" and kind == "exception"):
            found = LastWords(n, t.strip(), kind, cls, msg)
    warn = _last_nccl_warn(last) if found is None else None
    if warn is not None and lines and warn[0] == lines[-1][0]:
        # the log's very last line is NCCL's own error level: the paste (or the process) stops at
        # NCCL's complaint; a WARN that NCCL recovers from is followed by more of its output
        n, t, _, body = warn
        found = LastWords(n, t.strip(), "error line", "", body[_NCCL_WARN.search(body).end():].strip() or body)
    if found is None:
        tb = [x for x in last if _TRACEBACK.search(x[3]) and x[0] not in handled]
        if tb:  # the log ends inside a traceback's frames (its exception never printed)
            n, t, _, _ = tb[-1]
            # the last frame's source line may be the raise itself: its class and message are the
            # exception's ("raise RuntimeError(f\"NCCL error: {e}\")")
            r = next((_RAISE.match(x[3]) for x in last if x[0] > n and _RAISE.match(x[3])), None)
            found = LastWords(n, t.strip(), "traceback", r["cls"] if r else "",
                              r["msg"] if r else "the log ends inside a traceback")
    if found is None:
        found = weak
    if found is None and warn is not None:
        # NCCL's WARN is the last thing NCCL printed, with a command's output pasted after it (no
        # NCCL line, no logger's level): the paste may stop at NCCL's complaint, or NCCL went on
        # where the paste does not show it: structure alone
        n, t, _, body = warn
        found = LastWords(n, t.strip(), "error line", "", body[_NCCL_WARN.search(body).end():].strip() or body,
                          weak=True)
    if found is None and (said := _last_statement(last)) is not None:
        # the log stops at the program's own plain statement that something failed: structure alone
        n, t, _, body = said
        found = LastWords(n, t.strip(), "error line", "", body, weak=True)
    if found is None:
        # a death its logger reported below error level, with nothing after it but more of the same
        # or teardown: a warning (Ray's core reports a dead actor at I, a terminated raylet at W)
        for k in range(len(last) - 1, -1, -1):
            n, t, level, body = last[k]
            if n not in handled and (level in _QUIET_LEVELS or _QUIET_BRACKET.search(body)) \
                    and _DEATH.search(body) and _UNEXPECTED.search(body) and not is_shutdown_request(t):
                found = LastWords(n, t.strip(), "process death", "", body, quiet=True)
                break
            # only a logger's lines (at its quiet levels) or indented ones (a state dump) may follow
            # it: the program's own output after it ("success!") says it went on
            if not (level or t[:1] in " \t" or _QUIET_BRACKET.search(body)):
                break
    if found is None or shutdown_before(window, found.line) is not None:
        # a person's Ctrl+C at the end, or a report pasted after the log (the environment, the
        # installed packages, nvidia-smi): the failure (if any) is what came before it
        cut = before_interrupt(window) or before_report(window)
        return failure(cut[0]) if cut is not None else None
    if found.kind == "exception" and found.message.endswith("{"):
        found = replace(_json_record(found, lines), weak=found.weak)
    return found


# a line its program starts with its own level word ("Error: 12 unresolved ...", "FATAL: ..."): the
# program's own report, not a library's inline complaint
_OWN_ERROR_LEVEL = re.compile(r"^\[?(?:ERROR|FATAL|CRITICAL|Error|Fatal)\]?:\s")


def earlier_failure(window: Sequence[tuple[int, str]]) -> LastWords | None:
    """A failure shape anywhere in the window, not only among the last words (the log went on after
    it with lines that show no failure), the one nearest the end; None when there is none or a
    shutdown was requested before it.  Teardown noise and tracebacks a logger printed at WARNING and
    recovered from are skipped as in ``failure``.  An error line counts only when the program's own
    logger printed it at an error level: a library's inline complaint (a C library's "file.c:N TAG
    ERROR", a probe) that the program went on past is the library's, not a failure of the run.  For
    a log nothing else spoke about: a warning."""
    found = next(failures_above(window, None, own=True), None)
    if found is None or shutdown_before(window, found.line) is not None:
        return None
    return found


def failures_above(window: Sequence[tuple[int, str]], line: int | None,
                   own: bool = False) -> Iterator[LastWords]:
    """The failure shapes of the lines above ``line`` (the last words; None: the whole window),
    nearest first: where a log's last words are a consequence (an exit status, "initialization
    failed", a death) the line that says what went wrong is often further up.  Teardown noise and
    tracebacks handled at WARNING are skipped as in ``failure``; ``own``: an error line only where
    the program's own logger printed it at an error level (``earlier_failure``)."""
    lines = _nonblank(window)
    noise = teardown(lines) | _handled_tracebacks(lines)
    for n, t, level, body in reversed(lines):
        if (line is not None and n >= line) or n in noise:
            continue
        got = read_line(level, body)
        if got is not None and not (own and got[0] == "error line" and level not in _BAD_LEVELS
                                    and not _OWN_ERROR_LEVEL.match(body)):
            yield LastWords(n, t.strip(), *got)


def quiet_cause(window: Sequence[tuple[int, str]], classify, before: int | None = None,
                span: int = LAST) -> tuple[int, str, str] | None:
    """(line, finding id, text) of the last line among the last ``span`` (those above line
    ``before`` when given) whose words ``classify`` (the exception table: class and message, or a
    message alone) names, at whatever level it was logged; a stop someone asked for before it, or a
    line that says a way on, names nothing.  At the end of a log that names nothing, a person's
    Ctrl+C or a report pasted after it is no part of its last lines: what came before them is read."""
    got = _quiet_cause(window, classify, before, span)
    if got is None and before is None:
        cut = before_interrupt(window) or before_report(window)
        if cut is not None:
            got = _quiet_cause(cut[0], classify, None, span)
    return got


def _quiet_cause(window: Sequence[tuple[int, str]], classify, before: int | None,
                 span: int) -> tuple[int, str, str] | None:
    lines = _nonblank(window)
    noise = teardown(lines)
    kept = [x for x in lines if x[0] not in noise and (before is None or x[0] < before)]
    for n, t, level, body in reversed(kept[-span:]):
        # (not what a logger printed at INFO/DEBUG, a status report; not a library's probe that its
        # caller goes on past: torch's "[W socket.cpp]" retries, NCCL's INFO and WARN lines; not a
        # comment: a script's or a table's "#" line is nobody's failure)
        if level in ("INFO", "DEBUG") or body.startswith("#") or _WAY_ON.search(body) or _QUIET_BRACKET.search(body) \
                or _NCCL_QUIET.search(body) or "NCCL WARN" in body:
            continue
        exc = parse_exception(body)
        fid = classify(*exc) if exc is not None else classify("", body)
        if fid is not None:
            return None if shutdown_before(window, n) is not None else (n, fid, t.strip())
    return None


# a JSON record's message field ("message": "RendezvousConnectionError: ..."), as torchelastic's
# error handler prints the exception it caught
_JSON_MESSAGE = re.compile(r'^"message"\s*:\s*"(?P<m>(?:[^"\\]|\\.)+)')


def _json_record(found: LastWords, lines: Sequence[tuple[int, str, str, str]]) -> LastWords:
    """An error line that opens a JSON record ("error_handler: {"): the exception is the record's
    innermost "message" field."""
    for n, t, _, body in lines:
        if n <= found.line:
            continue
        m = _JSON_MESSAGE.match(body)
        exc = parse_exception(m["m"]) if m is not None else None
        if exc is not None:
            return LastWords(n, t.strip(), "exception", exc[0], exc[1])
    return found


# a native stack dump a C++ runtime prints as it aborts (glog's "*** Check failure stack trace: ***",
# Ray's spdlog "*** StackTrace Information ***", "*** Begin stack trace ***"), then one frame a line
_STACK_HEAD = re.compile(r"(?i)^\*\*\* .{0,40}\bstack ?trace\b.{0,40}\*\*\*$"
                         # torch's C++ exception: "Exception raised from X at file.cpp:N (most recent call first):"
                         r"|^Exception raised from \S+ at \S+ \(most recent call first\):$")
_FRAME = re.compile(r"^(?:\S+|@\s+0x[0-9a-f]+\b.*|#\d+\s+0x[0-9a-f]+\b.*|\S*\(\S*\)\s*\[0x[0-9a-f]+\])$")
# torch's C++ frames ("frame #3: c10d::ProcessGroupNCCL::... + 0x35d (0x7f.. in /x/libtorch_cuda.so)"):
# a dump of them ends a log with or without its head
_TORCH_FRAME = re.compile(r"^frame #\d+: ")
# glibc's backtrace_symbols as TensorRT-LLM and others print it, numbered, without a head
# ("1       0x7fafe75ac233 /opt/x/libtriton_tensorrtllm.so(+0x123233) [0x7fafe75ac233]")
_NUMBERED_FRAME = re.compile(r"^\d{1,3}\s+0x[0-9a-f]{6,16}\s+\S")


# a JVM stack trace's frame ("at org.x.Y.run(Y.java:42)", "... 5 more"): the exception line is above its
# frames and a chain's root cause is its last "Caused by:"
_JAVA_FRAME = re.compile(r"^at [\w$.<>/-]{1,300}\((?:[^()\n]{0,200}\.(?:java|kt|scala|groovy|clj)(?::\d+)?"
                         r"|Native Method|Unknown Source)\)(?: ~?\[[^\]\n]{0,200}\])?$"
                         r"|^\.\.\. \d+ (?:more|common frames omitted)$")


def _before_java_stack(lines: list[tuple[int, str, str, str]]) -> list[tuple[int, str, str, str]] | None:
    """``lines`` ending in a JVM stack trace, cut to its root cause's line (the chain's last
    exception, the wrappers above it left out), or None when they do not end in one."""
    k = len(lines)
    while k > 0 and k > len(lines) - 400 and _JAVA_FRAME.match(lines[k - 1][3]):
        k -= 1
    if k == len(lines) or k == 0 or parse_exception(lines[k - 1][3]) is None:
        return None
    root = lines[k - 1]
    j = k - 1
    # up the chain: the wrappers' lines and frames
    while j > 0 and j > len(lines) - 400 and (_JAVA_FRAME.match(lines[j - 1][3]) or (
            parse_exception(lines[j - 1][3]) is not None and _JAVA_FRAME.match(lines[j][3]))):
        j -= 1
    return [*lines[:j], root]


def _before_native_stack(lines: list[tuple[int, str, str, str]]) -> list[tuple[int, str, str, str]]:
    """``lines`` without a native stack dump that ends them: its frames are how the process
    aborted, the line above the dump is what it died of (as a Python traceback's exception is)."""
    if lines and lines[-1][3][:1] in "a." and (java := _before_java_stack(lines)) is not None:
        return java
    for k in range(len(lines) - 1, max(-1, len(lines) - 200), -1):
        body = lines[k][3]
        if _STACK_HEAD.match(body):
            return lines[:k]
        if not _FRAME.match(body):
            break
    k = len(lines)
    while k > 0 and k > len(lines) - 200 and _NUMBERED_FRAME.match(lines[k - 1][3]):
        k -= 1
    if len(lines) - k >= 3:  # a run of frames, not one line that happens to start with a number
        return lines[:k]
    k = len(lines)
    while k > 0 and k > len(lines) - 200 and _TORCH_FRAME.match(lines[k - 1][3]):
        k -= 1
    if k < len(lines):
        return lines[:k - 1] if k > 0 and _STACK_HEAD.match(lines[k - 1][3]) else lines[:k]
    return lines


_NCCL_WARN = re.compile(r"\bNCCL WARN\b")
# a death logged below error level counts when its words say nobody meant it (old Rays warn "a worker
# died or was killed" at every exit): unexpected, abnormal, a fatal signal, a core dump, the OOM killer
_UNEXPECTED = re.compile(r"(?i)\bunexpected(?:ly)?\b|\babnormal(?:ly)?\b|\bSIG(?:KILL|SEGV|ABRT|BUS|ILL|FPE)\b"
                         r"|\bsignal (?:6|7|9|11)\b|\bcore dumped\b|\bSegmentation fault\b|\bKilled process \d+|\boom")
_RAISE = re.compile(r"^raise (?P<cls>[A-Z]\w*(?:Error|Exception|Failure|Timeout)\w*)\(f?[\"'](?P<msg>[^\"'\n]{1,300})")


# a program's own statement that it failed, in plain words at the line's margin: "Failed to initialize
# NVML: Unknown Error", "Unable to load the model", "Could not connect to ...", "Timed out waiting for
# ..."; the same words with a way on after them (a fallback, a retry, something skipped) are a warning
# the program went on past
_STATEMENT = re.compile(
    r"^(?:(?:Failed to|Unable to|Could not|Couldn't|Cannot|Can't) [a-z]\w+"
    r"|(?:Timed out|Timeout|Time-?out)(?: (?:waiting|after|while|expired|reached|exceeded|occurred|of|for|on))\b"
    # a named part that failed: "EngineCore failed to start.", "The server could not bind ..."
    r"|[A-Z][\w.-]{0,40}(?: [\w.-]{1,40}){0,3} (?:failed to|could not|cannot|was unable to) [a-z]\w+"
    r"|An? (?:\w+ )?(?:error|exception|failure) (?:has )?(?:occurred|happened|was raised)\b"
    r"|(?:Status|Result|State|Outcome): (?:FAILED|FAILURE|ERROR|CRASHED|DEAD|failed|error|crashed)\b"
    # a status mark a script or a tool prints before its failure: a cross, a bracketed FAIL, a starred
    # or arrowed ERROR
    r"|(?:\u274c|\u2717|\u2718|\u2716|\u26d4|\U0001f4a5|\U0001f534)\s*\S"
    r"|\[(?:FAIL|FAILED|FAILURE|ERR)\]"
    r"|(?:\*{2,3}|=+>|-+>|!{2,3}) ?(?:ERROR|FATAL|FAILED|FAILURE|Error|Fatal)\b)"
)
_WAY_ON = re.compile(r"(?i)\bfall(?:ing|s)? ?back\b|\bretry(?:ing)?\b|\bwill (?:retry|try)\b|\btrying\b|\bignor(?:e|ed|ing)\b"
                     r"|\bskip(?:ped|ping)?\b|\binstead\b|\bdefault(?:ing|s)? to\b|\busing\b|\bcontinu(?:e|ing)\b")


def _last_statement(last: list[tuple[int, str, str, str]]) -> tuple[int, str, str, str] | None:
    """The log's very last line when it is a failure statement (``_STATEMENT``) at no logger's
    level or at an error level, and says no way on (``_WAY_ON``)."""
    if not last:
        return None
    n, t, level, body = last[-1]
    if (level and level not in _BAD_LEVELS) or _QUIET_BRACKET.search(body) or is_shutdown_request(body):
        return None
    return last[-1] if _STATEMENT.match(body) and not _WAY_ON.search(body) else None


def _last_nccl_warn(last: list[tuple[int, str, str, str]]) -> tuple[int, str, str, str] | None:
    """The last of ``last`` when it is an NCCL WARN (not a probe's), or the last NCCL WARN when
    nothing after it is NCCL's or a logger's (a command's output pasted after it)."""
    for k in range(len(last) - 1, -1, -1):
        n, t, level, body = last[k]
        if _NCCL_WARN.search(body):
            return last[k] if not _PROBE.search(body) else None
        if "NCCL" in body or level or _QUIET_BRACKET.search(body) or read_line(level, body) is not None:
            return None
    return None
# a library probed with dlopen (libibverbs, a net plugin) that is not there: NCCL goes on without it
_PROBE = re.compile(r"\bFailed to open lib[\w.-]*\.so|\bNET/Plugin\b|\bnet\.cc:\d+ NCCL WARN\b")
_TB_HEAD = re.compile(r"^Traceback \(most recent call last\)")


def _handled_tracebacks(lines: Sequence[tuple[int, str, str, str]]) -> set[int]:
    """Line numbers of the traceback lines (head, frames, exception) that a logger printed at
    WARNING level (``logger.warning(..., exc_info=True)``: its message line just above the
    traceback's head; an uncaught exception's traceback follows whatever was logged last, mostly
    INFO, so INFO proves nothing) and after which the program logged on below error level: an
    exception caught, reported and recovered from, not what ended the process."""
    out: set[int] = set()
    for h, (n, _t, _lvl, body) in enumerate(lines):
        if not _TB_HEAD.match(body) or h == 0 or lines[h - 1][2] not in _WARN_LEVELS:
            continue
        # the traceback runs to its exception line (the first line after the head that parses as one)
        end = next((k for k in range(h + 1, min(len(lines), h + 200))
                    if parse_exception(lines[k][3]) is not None), None)
        if end is None:
            continue
        if any(lvl in _QUIET_LEVELS for _, _, lvl, _ in lines[end + 1:]):
            out.update(x[0] for x in lines[h:end + 1])
    return out


# a launcher sending the signal to the other ranks after one failed is teardown, not a request
_SENDING = re.compile(r"(?i)\bsen(?:d|ding|t)\b[^\n]{0,60}\bsig(?:nal|term|int)\b")


# how to stop it, told to the person at the terminal: uvicorn's "(Press CTRL+C to quit)" on every server
# start, "Use Ctrl-C to stop", "hit Ctrl+C to abort": no request
_STOP_HINT = re.compile(r"(?i)\b(?:press|hit|use|type|enter)\s+(?:the\s+)?Ctrl\+?-?C\b|\bCtrl\+?-?C to (?:quit|stop|exit|cancel|abort|interrupt)\b")


def is_shutdown_request(text: str) -> bool:
    """A line saying this process was asked to stop (received SIGTERM/SIGINT, Ctrl+C, its own
    "shutting down" notice), not a death or a failure reported while it stopped, nor a hint how to stop it."""
    level, body = _body(text, lead=False)  # (a level word behind a peeled prefix: structure, no level)
    if body and ("ctrl" in body or "Ctrl" in body or "CTRL" in body):
        body = _STOP_HINT.sub("", body)
    if not body or level in _BAD_LEVELS or not _SHUTDOWN.search(body) or _SENDING.search(body):
        return False
    # (a death the line says by itself: words alone, "terminated unexpectedly", do not unmake a request)
    if _DEATH_SPOKEN.search(body.replace("SIGINT", "").replace("SIGTERM", "")) or _EXIT.search(body):
        return False
    exc = parse_exception(body)
    return exc is None or exc[0].endswith("KeyboardInterrupt")


# the shell's notice of a child that SIGTERM ended ("Terminated", "./run.sh: line 3:  42 Terminated  cmd")
_TERMINATED = re.compile(r"^(?:\S+: line \d+: +\d+ )?Terminated\b")


def traceback_after(window: Sequence[tuple[int, str]], line: int) -> bool:
    """Whether a Python traceback's frames follow ``line`` in the window (an error line that opens a
    traceback cut before its exception); not the traceback of a Ctrl+C or a stop asked for after it."""
    after = [t for n, t in window if n > line]
    return any(_TRACEBACK.search(t) for t in after) and not any(
        is_shutdown_request(t) or _INTERRUPTED.match(lineprefix.clean(t).strip()) for t in after)


def stopped_on_request(window: Sequence[tuple[int, str]]) -> tuple[int, str] | None:
    """(line, text) when a log's last words are a stop someone asked for (SIGTERM/SIGINT, Ctrl+C, its
    own "shutting down" notice, the shell's "Terminated") and nothing after it failed; else None."""
    rows = _nonblank(window)[-LAST:]
    for k in range(len(rows) - 1, -1, -1):
        n, t, level, body = rows[k]
        if is_shutdown_request(t) or (level not in _BAD_LEVELS and _TERMINATED.match(body)):
            after = rows[k + 1:]
            if any(read_line(lv, b) is not None for _, _, lv, b in after):
                return None
            return n, t.strip()
    return None


def shutdown_before(window: Sequence[tuple[int, str]], line: int) -> tuple[int, str] | None:
    """(line, text) of a shutdown request printed before ``line`` in the window."""
    for n, t in window:
        if n >= line:
            break
        if is_shutdown_request(t):
            return n, t.strip()
    return None


def component(lw: LastWords, window: Sequence[tuple[int, str]]) -> str:
    """The layer that reported the failure: its own line first, then the lines above it (nearest
    first), then those after it; "" when none says."""
    near = [t for n, t in reversed(window) if n < lw.line] + [t for n, t in window if n > lw.line]
    for text in [lw.text, *near]:
        for name, rx in _COMPONENTS:
            if rx.search(text):
                return name
    return ""


# ----------------------------------------------------------------------------- structural facts
# Facts that name a catalogue cause by structure, whatever the sentence around them: an errno (by
# symbol, number or the C library's own strerror text) in a socket or rendezvous failure, the GPU
# driver's out-of-memory status, the dynamic loader's undefined symbol, an operator the build lacks,
# a dtype the GPU lacks, and shared memory that ran out.  Each maps to an id that exists.

# errno of a socket call -> the cause it means for a distributed job, by symbol, by number ("errno:
# 99", "[Errno 99]", "(os error 99)", torch's "code: -99, name: EADDRNOTAVAIL") or by strerror text
def _errno(symbol: str, number: str, text: str) -> re.Pattern[str]:
    """An errno by its symbol, its number after "errno"/"error" (either sign) or torch's
    "code: -N", or the C library's strerror text."""
    return re.compile(rf"(?i)\b{symbol}\b|\b(?:(?:errno|error)[:= ]*\(?-?|code[:= ]*-){number}\b|{text}")


_ERRNO: tuple[tuple[re.Pattern[str], str, str], ...] = (
    # the address asked for is on no interface of this host: the wrong IP/interface was given
    (_errno("EADDRNOTAVAIL", "99", "Cannot assign requested address"),
     "wrong_network_interface", "EADDRNOTAVAIL: the address is on no interface of this host"),
    # an IPv6 address (or family) this host's stack or interface does not have
    (_errno("EAFNOSUPPORT", "97", "Address family not supported"),
     "wrong_network_interface", "EAFNOSUPPORT: address family not usable on this host"),
    (_errno("EADDRINUSE", "98", "Address already in use"), "port_in_use", "EADDRINUSE: the port is taken"),
    # nothing listens at the rendezvous address (yet, or at all): the master is not up or the port is wrong
    (_errno("ECONNREFUSED", "111", "Connection refused"),
     "rendezvous_timeout", "ECONNREFUSED: nothing listens at the rendezvous address"),
    # EHOSTUNREACH is 113 and ENETUNREACH 101 (Linux); 110 is ETIMEDOUT, a peer that never answered
    (_errno("EHOSTUNREACH", "113", "No route to host"),
     "wrong_network_interface", "EHOSTUNREACH: no route to the peer host"),
    (_errno("ENETUNREACH", "101", "Network is unreachable"),
     "wrong_network_interface", "ENETUNREACH: no route to the peer's network"),
    (_errno("ETIMEDOUT", "110", "Connection timed out"), "rendezvous_timeout", "ETIMEDOUT: the peer never answered"),
    # getaddrinfo's own failures (EAI_NONAME -2, EAI_AGAIN -3, EAI_NODATA -5): the rendezvous host
    # name (MASTER_ADDR, the head's address) resolves to nothing here, so this rank cannot join
    (re.compile(r"(?i)\bgaierror\b|\bEAI_(?:NONAME|AGAIN|NODATA)\b|\[Errno -[235]\]|Name or service not known"
                r"|Temporary failure in name resolution|No address associated with hostname"
                r"|nodename nor servname provided"),
     "rendezvous_timeout", "the rendezvous host name does not resolve (getaddrinfo)"),
)
# a socket/rendezvous/store/transport call: an errno only names a network cause in such a line (or
# next to one)
_NET_CONTEXT = re.compile(
    r"(?i)socket|connect|rendezvous|\bstore\b|bind|listen|TCPStore|c10d|gloo|NCCL|bootstrap|\bport\b|"
    r"\baddress\b|MASTER_ADDR|init_process_group|\bgRPC\b|\bGCS\b"
)
# the world size a runtime checks against its parallel layout, either side of the comparison
# (a value may follow each name: "world_size (4)", "TP size 2", "mpi_size=1")
_NUM = r"(?:\s*[(\[=:]?\s*\d+\s*[)\]]?)?"
_WORLD = r"\b(?:mpi[ _]?size|world[ _]?size|n_?ranks|num[ _]?ranks|num_?gpus|n_?gpus)\b" + _NUM
_EQ = (r"(?:==|!=|=|must (?:be )?equal(?: to)?|(?:is )?(?:expected to be )?(?:not )?equal to|should be"
       r"|does not (?:match|equal))")
_TPXPP = (r"\b(?:tp|tensor[ _]parallel)(?:[ _]size)?\b" + _NUM + r"\s*\*\s*(?:pp|pipeline[ _]parallel)(?:[ _]size)?\b"
          + _NUM)
# sh/dash/bash/zsh's message for a command it cannot find: "sh: 1: X: not found", "bash: X: command
# not found", "/entrypoint.sh: line 67: exec: X: not found" (the body of the line, whole)
# (and env's, for the program a script's #! line names: "/usr/bin/env: 'python': No such file or directory")
_SHELL_NOT_FOUND = (r"^(?:(?:\S*/)?(?:(?:ba|da|z|k)?sh|[\w.-]+\.(?:ba)?sh):(?: line \d+:| \d+:)? (?:exec: )?(?:{cmd})"
                    r": (?:command )?not found|(?:\S*/)?env: '?(?:{cmd})'?: No such file or directory)\s*$")

# a line that only lists what might have happened (Ray's "potential root causes: (1) killed by SIGKILL
# ...", advice with "if" or "when") or a numbered item of such a list names no fact
_HEDGE_WORDS = ("potential", "possible", "possibly", "may", "might", "could", "likely", r"e\.g\.", "include",
                "includes", "including", "causes", "if", "will", "would", "when", "unless", "threshold")


def _not_hedged(*more: str) -> str:
    """A regex head (case-insensitive) for a line neither hedged nor a numbered list item."""
    return r"(?i)^(?!\s*\(?\d{1,2}[.)]\s)(?!.*\b(?:" + "|".join(_HEDGE_WORDS + more) + r")\b)"


_NO_DRIVER_WHY = "the process was told no NVIDIA driver is in reach (GPU functionality will not be available)"
_PTX_WHY = "the driver cannot load PTX from a newer CUDA toolkit (cudaErrorUnsupportedPtxVersion)"
_PY_NOT_FOUND_WHY = "the Python interpreter did not find the script or module it was asked to run"
_GPU_LOST_WHY = "the driver lost the GPU (no device handle for it, fallen off the bus)"
_NVRM_OOM_WHY = "the NVIDIA kernel driver (NVRM) could not allocate memory: the machine's memory ran out"
_SIGBUS_WHY = "a process died of SIGBUS (a shared-memory mapping that /dev/shm could not back)"

_FACTS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    # NCCL's error level printed from its RDMA transport's own source files (the verbs wrapper, the
    # IB net plugin): while a communicator never finished init, the RDMA setup is what failed
    (re.compile(r"\b(?:net_ib|ibvwrap|ibvsymbols|ibvcore)(?:/\w+)?\.c[cu]?:\d+ NCCL WARN\b"),
     "nccl_ib_error", "an NCCL WARN from its RDMA (IB verbs) transport"),
    # the kernel driver's own allocation failure (NVRM, its status NV_ERR_NO_MEMORY): no "CUDA out of
    # memory" text; the driver allocates from system memory, which on unified memory (GB10) is the
    # GPU's too, so the machine's memory ran out, not a GPU's own
    (re.compile(r"\bNV_ERR_NO_MEMORY\b|\bNVRM\b.*(?i:out of memory|no memory|failed to allocate)"),
     "unified_memory_pressure", _NVRM_OOM_WHY),
    # ... and the CUDA runtime's or driver API's status for an allocation that failed, whoever prints it
    (re.compile(r"\bcudaErrorMemoryAllocation\b|\bCUDA_ERROR_OUT_OF_MEMORY\b"),
     "cuda_oom", "the GPU driver could not allocate memory"),
    # older NCCL wordings of /dev/shm running out
    (re.compile(r"(?i)(?:/dev/shm\b.*(?:No space left|posix_fallocate|ftruncate|too small|failed)"
                r"|posix_fallocate.*(?:failed|No space left|\b28\b)|No space left on device.*\bshm\b)"),
     "nccl_shm_error", "shared memory (/dev/shm) ran out"),
    # the CUDA driver's multicast calls (NCCL's NVLS setup) failing, whoever reports them
    (re.compile(r"\bcuMulticast\w+\b[^\n]{0,120}\b(?i:fail\w*|error|not supported|invalid|not permitted)"
                r"|(?i:fail\w*|error)\b[^\n]{0,80}\bcuMulticast\w+"),
     "nvls_multicast_failed", "a CUDA multicast call (NVLS) failed"),
    # a process killed by SIGBUS: a shared-memory mapping it touched could not be backed (/dev/shm,
    # 64 MiB in a container by default, ran out); NCCL's own segments name nccl_shm_error instead
    # (the death itself: the shell's "Bus error", Python's fatal handler, a signal report; not a list of
    # what might have killed something)
    # (UCX's and others' signal handler too: "Caught signal 7 (Bus error: nonexistent physical address)")
    (re.compile(r"(?i)(?:^|\bFatal Python error: |\bkilled by signal:? |\*\*\* )(?:Bus error|SIGBUS)\b"
                r"|\bBus error \(core dumped\)|\bSIGBUS received\b|\bsignal 7 \((?:SIGBUS|Bus error)\b"),
     "shm_too_small", _SIGBUS_WHY),
    # the driver lost a GPU: NVML has no handle for it (nvidia-smi's "Unable to determine the device
    # handle for GPU1: 0000:34:00.0: Unknown Error", "... GPU is lost"), the kernel's Xid 79; the
    # GPU is gone until a reset, whatever ran on it
    (re.compile(r"\bUnable to determine the device handle for GPU\s?[\w:.]*:[^\n]*\b(?:Unknown Error|GPU is lost)\b"
                r"|\bGPU has fallen off the bus\b"),
     "cuda_error", _GPU_LOST_WHY),
    # a CUDA driver API entry point (cuXxx, cuXxx_v3) missing from the driver's own library
    # (libcuda / nvcuda): the installed driver predates the runtime that asks for it
    (re.compile(r"\bcu[A-Z]\w{2,40}\b[^\n]{0,80}\b(?:not found|failed|missing|undefined)"
                r"[^\n]{0,200}\b(?:libcuda\S*|nvcuda\S*)|\b(?:libcuda\S*|nvcuda\S*)[^\n]{0,200}"
                r"\b(?:symbol lookup for|undefined symbol:?|could not find symbol|missing symbol) cu[A-Z]\w{2,40}"),
     "cuda_driver_too_old", "a CUDA driver API symbol is missing from the driver's library"),
    # a shell's own "not found" for the program it was asked to run (what exit status 127 prints):
    # an option in the program's place means the image's entrypoint and the command do not fit
    # (arguments meant for the entrypoint's program ran as the program); any other name, the image
    # lacks the program.  Only among a log's last lines (_LAST_ONLY_WHY): a probe for an optional
    # tool that is absent says the same earlier in a healthy log
    (re.compile(_SHELL_NOT_FOUND.format(cmd=r"-\S*")),
     "docker_entrypoint_error", "the shell was asked to run an option as a program (entrypoint and command do not fit)"),
    (re.compile(_SHELL_NOT_FOUND.format(cmd=r"[^\s-]\S*")),
     "broken_install", "the shell did not find the program it was asked to run"),
    # the interpreter's own refusal to start what it was given (CPython's exact words, exit status 2 or
    # 1): a script that is not there, a module `-m` cannot find; last lines only, like the shell's
    # (a log prefix reader may have taken "python3: " as the line's tag)
    (re.compile(r"^(?:(?:\S*/)?python[\d.]*: )?can't open file '[^'\n]*': \[Errno \d+\]"
                r"|^(?:\S*/)?python[\d.]*: No module named [\w.]+\s*$"),
     "broken_install", _PY_NOT_FOUND_WHY),
    # a shell's (or a launcher's) exit status 127: a program, or a library it links against, not found
    (re.compile(r"(?i)\bexit(?:ed)?(?: with)? (?:status|code)[:= ]*127\b|\bexit_?code[:= ]*127\b"),
     "broken_install", "exit status 127: a program or a library it needs was not found"),
    # the dynamic loader: a binary built against another torch/CUDA/Python (an ABI mismatch)
    # (macOS's dyld says "Symbol not found:" / "Library not loaded:")
    (re.compile(r"\bundefined symbol: \S+|\bsymbol lookup error\b|\bGLIBC(?:XX)?_[\d.]+' not found"
                r"|\bSymbol not found: \S+|\bLibrary not loaded: \S+"),
     "broken_install", "undefined symbol: a binary built against another version"),
    # CUTLASS's own status for a kernel that cannot run here (its status strings, whoever prints
    # them): a build whose kernels were compiled for another architecture than this GPU's
    (re.compile(r"(?i:\bcutlass\b)[^\n]{0,60}\bError (?:Internal|Arch Mismatch|Not Supported)\b"
                r"|\bkErrorArchMismatch\b"),
     "broken_install", "CUTLASS: a kernel of this build cannot run on this GPU (Error Internal / Arch Mismatch)"),
    # an operator the installed build does not have
    (re.compile(r"\bCould not run '[\w:.]+' with arguments from the '\w+' backend"
                r"|\boperator [\w:.]+ does not exist\b|\bUnknown builtin op: \S+|(?i:\bNo such operator) \S+"),
     "broken_install", "an operator missing from the installed build"),
    # a dtype the GPU (or its compute capability) cannot run
    # (the fp8 and fp4 formats by their kernels' names too: "fp8e4nv", "WFP4A16", "mxfp4")
    (re.compile(r"(?i)\b(?:bf16|bfloat16|fp8\w*|float8\w*|w?(?:mx|nv)?fp4\w*)\b[^.\n]{0,80}\b(?:not supported|only supported|unsupported|requires)\b"
                r"[^.\n]{0,60}\b(?:GPU|device|compute capability|hardware|platform|architecture|sm_?\d+)"
                r"|\b(?:GPU|device|hardware)\b[^.\n]{0,60}\bdoes not support\b[^.\n]{0,20}\b(?:bf16|bfloat16|fp8\w*|float8\w*)\b"),
     "dtype_unsupported_gpu", "a dtype this GPU does not support"),
    # a check of the launched ranks against the parallel layout, in whichever runtime's words: the
    # MPI/world size (or rank count) compared with tp*pp, or the ranks asked for beyond those launched
    (re.compile(rf"(?i)\b{_WORLD}\s*\)?\s*{_EQ}\s*\(?\s*{_TPXPP}|{_TPXPP}\s*\)?\s*{_EQ}\s*\(?\s*{_WORLD}"),
     "world_size_mismatch", "the launched world size does not match tp*pp"),
    # the CUDA runtime's and driver's own status for a driver older than the runtime (the enum or
    # the runtime's fixed strerror text), whoever prints it
    (re.compile(r"\bcudaErrorInsufficientDriver\b|\bCUDA_ERROR_INSUFFICIENT_DRIVER\b"
                r"|\bCUDA driver version is insufficient for CUDA runtime version\b"),
     "cuda_driver_too_old", "the CUDA driver is older than the runtime (cudaErrorInsufficientDriver)"),
    # ... and as NVIDIA's containers say it at start (their entrypoint's banner: "This container was built
    # for NVIDIA Driver Release 450.51 or later, but version 440.64.00 was detected"), or the driver's
    # own status for forward compatibility this GPU cannot have (cuInit returning 804)
    (re.compile(r"\bcontainer was built for NVIDIA Driver Release [\d.]+ or later\b"
                r"|\bcudaErrorCompatNotSupportedOnDevice\b|\bCUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE\b"
                r"|\bcuInit\(0\) returned 804\b|\bforward compatibility was attempted on non supported HW\b"),
     "cuda_driver_too_old", "the container needs a newer NVIDIA driver than the host's"),
    # ... and for PTX (or a cubin) built by a toolkit newer than the driver's JIT knows: the enum, the
    # runtime's fixed strerror text (cudaErrorUnsupportedPtxVersion, CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
    (re.compile(r"\bcudaErrorUnsupportedPtxVersion\b|\bCUDA_ERROR_UNSUPPORTED_PTX_VERSION\b"
                r"|\bthe provided PTX was compiled with an unsupported toolchain\b"),
     "cuda_driver_too_old", _PTX_WHY),
    # ... and a process told by its image or its launcher that no NVIDIA driver is in reach (the CUDA
    # images' start banner, a launcher's own notice): the container got no GPU runtime
    (re.compile(r"\bThe NVIDIA Driver was not detected\b"
                r"|\bGPU (?:acceleration|functionality|support) (?:will not|won't|is not going to) be available\b"),
     "no_gpu_visible", _NO_DRIVER_WHY),
    # ... and for no GPU at all
    (re.compile(r"\bcudaErrorNoDevice\b|\bCUDA_ERROR_NO_DEVICE\b|\bno CUDA-capable device is detected\b"),
     "no_gpu_visible", "CUDA sees no GPU (cudaErrorNoDevice)"),
    # a failed call of the RDMA verbs library (ibv_*), whoever reports it: the RDMA setup failed
    (re.compile(r"\b(?:Call to )?ibv_\w+(?:\(\))? failed\b|\bibv_\w+\([^()\n]{0,80}\) (?:failed|returned)"),
     "nccl_ib_error", "a call of the RDMA verbs library (ibv_*) failed"),
    # the kernel's OOM killer killing a process (dmesg / journald's kernel lines, a cgroup's limit)
    (re.compile(r"\b(?:Out of memory|Memory cgroup out of memory): Kill(?:ed)? process \d+|\binvoked oom-killer\b"
                r"|\boom-kill:constraint=|\boom_reaper: reaped process \d+"),
     "host_oom_killed", "the kernel's OOM killer killed a process"),
    # a process killed by SIGKILL however the parent words it (a signal's name or number, 128 + 9 =
    # 137, Python's -9, Go's "signal: killed"): what the kernel's OOM killer sends; a stop someone asked
    # for escalates to it too, but then a shutdown request comes first and the last words are no failure
    (re.compile(_not_hedged() + r".*?"
                r"(?:\b(?:killed|terminated) by (?:signal:? ?)?(?:9|SIGKILL)\b|\bsignal:? killed\b|<Signals\.SIGKILL: 9>"
                r"|\bsignal 9 \(SIGKILL\)|\binterrupted by signal 9\b|\bexit(?:ed)?(?: with)? (?:code|status)[:= ]*(?:137|-9)\b"
                r"|\bexit_?code[:= ]*(?:137|-9)\b|\breturn_?code[:= ]*-9\b|\bnon-zero exit status -9\b"
                r"|\bdied with\b[^\n]{0,40}\bSIGKILL\b"
                # the shell's own report of a child that SIGKILL ended: "Killed" as the line's last word
                # (after a progress bar's text too), or its job line "line 1:  4242 Killed  python x.py"
                r"|(?:^|[\]|\s])Killed\s*$|\bline \d+: +\d+ Killed\b)"),
     "host_oom_killed", "a process was killed by SIGKILL (what the kernel's OOM killer sends)"),
    # a manager killing or evicting a process for its memory (YARN, Kubernetes' eviction, a runtime's limit);
    # not a list of what might have happened (Ray's "potential root causes: (1) killed by SIGKILL by OOM ...")
    (re.compile(_not_hedged("check") +
                r".*?(?:\bkilled\b[^\n]{0,60}\b(?:memory (?:usage|use|limit|pressure)|out of memory|OOM)\b"
                r"|\bnode was low on (?:resource: )?memory\b|\bevicted\b[^\n]{0,60}\bmemory\b)"),
     "host_oom_killed", "a process was killed or evicted for its memory use"),
    # pip's resolver naming an installed package that does not satisfy another's requirement (pip
    # installs anyway): transformers older or newer than the engine asks for, or any other package
    (re.compile(r"(?:^|ERROR: )[\w.-]+ [\w.+!-]+ (?:requires|has requirement) transformers\b[^,\n]{0,80}, "
                r"but you(?:'ll)? have transformers [\w.+!-]+"),
     "transformers_version_mismatch", "pip: the installed transformers is not the version a package requires"),
    (re.compile(r"(?:^|ERROR: )[\w.-]+ [\w.+!-]+ (?:requires|has requirement) (?P<pkg>[\w.-]+)[^,\n]{0,80}, "
                r"but you(?:'ll)? have (?P=pkg) [\w.+!-]+"),
     "broken_install", "pip: an installed package is not the version another requires"),
    # a native stack (glibc's backtrace, TensorRT-LLM's "N  0xADDR symbol + off") running through an
    # engine's or a plugin's deserialisation: the engine file does not fit the runtime reading it
    (re.compile(r"^\s*\d{1,3}\s+0x[0-9a-f]{6,}\s+\S*\bdeserializ\w*(?:Plugin|Engine|CudaEngine)\b"),
     "trt_engine_version_mismatch", "the failure's native stack runs through TensorRT's engine deserialisation"),
    # a package's requirement on another that the installed one does not meet, in a resolver's or a
    # runtime check's words ("vllm 0.6.0 requires torch==2.4.0, but torch 2.5.1 is installed")
    (re.compile(r"(?i)\btransformers\b[^\n]{0,20}[<>=!~]=?[^\n]{0,40}\bbut\b[^\n]{0,20}\btransformers\b[^\n]{0,30}"
                r"\b(?:is installed|was found|installed|found)\b"),
     "transformers_version_mismatch", "the installed transformers is not the version a package requires"),
    (re.compile(r"(?i)\b[\w.-]+ [\w.+!-]+ requires (?P<pkg>[\w.-]+)\s*[<>=!~]=?[^,\n]{0,40}, but (?:you have )?(?P=pkg)\b"
                r"[^\n]{0,30}\b(?:is installed|was found|installed|found)\b"),
     "broken_install", "an installed package is not the version another requires"),
    # a TensorRT(-LLM) engine said to come from another version than the runtime's, in any words, even
    # as the runtime's own warning (it goes on, and fails later or wrongly)
    (re.compile(r"(?i)^(?=.*\b(?:tensorrt|trt)(?:[_-]?llm)?\b)(?=.*\bengine\b)(?=.*\b(?:built|serialized|created) (?:with|by|using)\b)"
                r"(?=.*\b(?:different|another|older|newer|mismatch\w*|incompatible|does(?: not|n.t) match)\b)"),
     "trt_engine_version_mismatch", "a TensorRT engine built by another version than the runtime"),
    # the RDMA provider library itself (libmlx5, rxe, EFA, ...) reporting a failed work completion:
    # a transfer on the RDMA fabric failed, whichever program drove it
    (re.compile(r"^(?:lib)?(?:mlx[45]|rxe|efa|bnxt_re|irdma|hns)\w*: [^\n]{0,80}\b(?:completion with error|CQE error)"),
     "nccl_ib_error", "the RDMA provider reported a failed work completion"),
)
# a fact that the lines just after it make more precise: (why, pattern one of the next ``span`` lines
# matches, id, why it then names).  A SIGBUS whose native stack runs through NCCL's API ("2
# 0x0000000000068d6c ncclGroupEnd()  ???:0", "#3 ncclCommInitRank ...") died on NCCL's own /dev/shm segment
_REFINED: tuple[tuple[str, re.Pattern[str], int, str, str], ...] = (
    (_SIGBUS_WHY, re.compile(r"^\s*#?\d{1,3}\s+(?:0x[0-9a-f]+\s+(?:in\s+)?)?[\w:]*\bnccl[A-Z]\w*\b"), 15,
     "nccl_shm_error", "a process died of SIGBUS inside NCCL (its /dev/shm segment could not be backed)"),
)

# the facts read from structure alone (a status enum, a failed call, a killer's or a shell's words,
# whoever printed them): a finding they name is an error only where the source's last words are
# more than structure (or the input already has an error); otherwise a warning
_INFERRED_WHY = frozenset({
    "the shell was asked to run an option as a program (entrypoint and command do not fit)",
    "the shell did not find the program it was asked to run",
    _PY_NOT_FOUND_WHY,
    "a CUDA driver API symbol is missing from the driver's library",
    "exit status 127: a program or a library it needs was not found",
    "the CUDA driver is older than the runtime (cudaErrorInsufficientDriver)",
    _PTX_WHY,
    _NO_DRIVER_WHY,
    "CUDA sees no GPU (cudaErrorNoDevice)",
    "a call of the RDMA verbs library (ibv_*) failed",
    "the kernel's OOM killer killed a process",
    "a process was killed by SIGKILL (what the kernel's OOM killer sends)",
    "a process was killed or evicted for its memory use",
    "pip: the installed transformers is not the version a package requires",
    "pip: an installed package is not the version another requires",
})


def inferred_fact(why: str) -> bool:
    """Whether a fact (``facts``'s why) is read from structure alone (``_INFERRED_WHY``)."""
    return why in _INFERRED_WHY


# facts that are a failure by themselves when a log ends on them, with no exception or error level
# around them: the driver's out-of-memory status, the RDMA provider's failed completion (not NCCL's
# own verbs WARNs: a probe for a library that is absent is one, and NCCL goes on without it)
_TERMINAL_WHY = frozenset({"the GPU driver could not allocate memory", _NVRM_OOM_WHY,
                           "the RDMA provider reported a failed work completion",
                           "the kernel's OOM killer killed a process",
                           "a process was killed by SIGKILL (what the kernel's OOM killer sends)",
                           "a process was killed or evicted for its memory use",
                           "the shell was asked to run an option as a program (entrypoint and command do not fit)",
                           "the shell did not find the program it was asked to run", _PY_NOT_FOUND_WHY})
# facts that count only as a log's last line (after them at most notes of the exit), never from the rest
_EXIT_NOTE = re.compile(r"(?i)\bexit(?:ed|ing)?\b|\bstatus \d+|\breturn(?:ed)? code\b")
_LAST_ONLY_WHY = frozenset({"the shell was asked to run an option as a program (entrypoint and command do not fit)",
                            "the shell did not find the program it was asked to run", _PY_NOT_FOUND_WHY})
# facts that stand even at WARNING level: a native extension that did not load (an undefined symbol)
# is a broken install whether or not the program went on (as a warning then); a dtype the GPU cannot
# run, as a wrapper's own logger says it before it gives up (not where it says a way on: a fallback)
QUIET_FACT_IDS = frozenset({"broken_install", "cuda_driver_too_old", "dtype_unsupported_gpu",
                            "transformers_version_mismatch", "trt_engine_version_mismatch"})
# facts by their why that stand at WARNING level too (whatever the rest of their id's facts do): a
# notice that the driver is out of reach is printed as a warning, and the program goes on without GPU;
# a GPU the driver lost, whatever printed after it (nvidia-smi goes on with the other GPUs' table)
QUIET_FACT_WHYS = frozenset({_NO_DRIVER_WHY, _GPU_LOST_WHY})
# facts a line withdraws when it says a way on: a dtype the GPU lacks, with a fallback to another
GIVES_WAY_IDS = frozenset({"dtype_unsupported_gpu"})


# NCCL's own WARN lines by the subsystem that printed them (its source file, or the subsystem tag it
# starts the message with): checked after the errno table, so a socket WARN that carries an errno
# names the errno's cause, and only when nothing more specific matched the line
_SUBSYSTEM = tuple((re.compile(rx), fid, why) for rx, fid, why in (
    (r"\b(?:shm|shmutils)\.(?:cc|h):\d+ NCCL WARN\b|\bNCCL WARN (?:SHM|Shm)\b", "nccl_shm_error",
     "an NCCL WARN from its shared-memory (SHM) transport"),
    # NVLink SHARP (NVLS): its multicast buffers set up by transport/nvls.cc, whatever the WARN says
    (r"\btransport/nvls\.cc:\d+ NCCL WARN\b|\bNCCL WARN NVLS\b", "nvls_multicast_failed",
     "an NCCL WARN from its NVLS (NVLink SHARP multicast) transport"),
    (r"\bNCCL WARN NET/IB\b|\bNCCL WARN (?:NET/)?(?:IB|ibv)\w* ?: ", "nccl_ib_error",
     "an NCCL WARN tagged NET/IB (its RDMA transport)"),
    (r"\b(?:misc/socket|net_socket)\.cc:\d+ NCCL WARN\b|\bNCCL WARN NET/Socket\b", "nccl_network_error",
     "an NCCL WARN from its socket transport"),
    # the graph search (rings, trees, paths) found the ranks' topology inconsistent: an internal
    # check of NCCL failed (the hardware discovery files, topo/xml, only describe the machine)
    (r"\bgraph/(?:rings|trees|connect|search|paths)\.cc:\d+ NCCL WARN\b", "nccl_internal_error",
     "an NCCL WARN from its graph search (inconsistent rings/trees)"),
))
# the facts that explain a communicator init that never completed (the log stops inside it)
INIT_FACT_IDS = frozenset({"nccl_ib_error", "nccl_shm_error"})


def facts(window: Sequence[tuple[int, str]], known: Iterable[str], quiet: bool = False, terminal: bool = False,
          inferred: bool = True, whys: frozenset[str] | None = None) -> tuple[int, str, str, str] | None:
    """(line, finding id, why, text) of the first structural fact in the window whose id exists in
    ``known`` (the catalogue's ids), or None.  Lines logged below error level are skipped (a
    warning is something handled) unless ``quiet``; ``terminal``: only the facts that are a failure
    by themselves; not ``inferred``: without the facts of structure alone (``_INFERRED_WHY``); ``whys``:
    only those facts."""
    ids = set(known)
    rows = _nonblank(window)
    for k, (n, t, level, body) in enumerate(rows):
        if not quiet and (level in _QUIET_LEVELS or _QUIET_BRACKET.search(body)):
            continue
        for rx, fid, why in _FACTS:
            if fid in ids and (whys is None or why in whys) and rx.search(body) \
                    and (why in _TERMINAL_WHY if terminal else why not in _LAST_ONLY_WHY) \
                    and (inferred or why not in _INFERRED_WHY) and not (fid in GIVES_WAY_IDS and _WAY_ON.search(body)) \
                    and (why not in _LAST_ONLY_WHY or all(_EXIT_NOTE.search(r[3]) for r in rows[k + 1:])):
                for of, rx2, span, fid2, why2 in _REFINED:
                    if why == of and fid2 in ids and any(rx2.match(r[3]) for r in rows[k + 1:k + 1 + span]):
                        return n, fid2, why2, t.strip()
                return n, fid, why, t.strip()
        if terminal:
            continue
        near = " ".join(r[3] for r in rows[max(0, k - 1):k + 2])
        for rx, fid, why in _ERRNO:
            if fid in ids and (whys is None or why in whys) and rx.search(body) and _NET_CONTEXT.search(near):
                return n, fid, why, t.strip()
        for rx, fid, why in _SUBSYSTEM:
            if fid in ids and (whys is None or why in whys) and rx.search(body):
                return n, fid, why, t.strip()
    return None


# /proc/meminfo's CMA lines: free CMA above the total is impossible, the kernel's CMA accounting
# is broken (GB10 kernels whose KHO change broke it; RDMA registration then fails)
_CMA = re.compile(r"^\s*Cma(?P<k>Total|Free):\s+(?P<v>\d+) kB\b")


def cma_broken(window: Sequence[tuple[int, str]]) -> tuple[int, str] | None:
    """(line, why) when the window's /proc/meminfo says CmaFree > CmaTotal, else None."""
    seen: dict[str, tuple[int, int]] = {}
    for n, t in window:
        if "Cma" not in t:
            continue
        m = _CMA.match(lineprefix.body(lineprefix.clean(t)))
        if m is not None:
            seen[m["k"]] = (n, int(m["v"]))
    if "Total" in seen and "Free" in seen and seen["Free"][1] > seen["Total"][1]:
        return (seen["Free"][0], f"/proc/meminfo: CmaFree {seen['Free'][1]} kB > CmaTotal {seen['Total'][1]} kB: "
                                 "the kernel's CMA accounting is broken")
    return None


# nvidia-smi's CSV: the fields come from `--query-gpu=a,b,...` on the command line, or from the header
# row (`memory.total [MiB]`); a row under them splits into as many ", "-separated values
_QUERY_FIELDS = re.compile(r"--query-gpu[= ]([\w.,]+)")
_CSV_HEADER = re.compile(r"^\s*[a-z][\w.]*(?: \[[^\]]*\])?(?:\s*,\s*[a-z][\w.]*(?: \[[^\]]*\])?)+\s*$")
_MEM_FIELDS = ("memory.total", "memory.used", "memory.free", "memory.reserved")
_NO_VALUE = ("[N/A]", "[Not Supported]", "N/A", "Not Supported")


def _table_cells(body: str) -> list[str] | None:
    """The cells of one row of nvidia-smi's table ("| a | b | c |"), or None."""
    b = body.strip()
    if len(b) < 3 or b[0] != "|" or b[-1] != "|":
        return None
    return [c.strip() for c in b[1:-1].split("|")]


def _table_memory_unreported(window: Sequence[tuple[int, str]]) -> tuple[int, str, str] | None:
    """nvidia-smi's default table: the header row that has a "Memory-Usage" cell gives its column,
    and a GPU's row with no value in that column ("Not Supported", "N/A") is the fact."""
    col = width = -1
    left = 0
    for n, t in window:
        cells = _table_cells(lineprefix.body(lineprefix.clean(t)))
        if cells is None:
            continue
        if "Memory-Usage" in cells:
            col, width, left = cells.index("Memory-Usage"), len(cells), 40
            continue
        if not left:
            continue
        left -= 1
        if len(cells) == width and cells[col] in _NO_VALUE:
            return n, f"nvidia-smi's table gives Memory-Usage as {cells[col]}: this GPU reports no memory of its own", \
                t.strip()
    return None


# nvidia-smi -q's section of the GPU's own memory and its rows ("    Total    : N/A")
_Q_SECTION = re.compile(r"^FB Memory Usage$")
_Q_ROW = re.compile(r"^(?P<k>Total|Used|Free)\s+:\s+(?P<v>.+?)\s*$")


def _query_memory_unreported(window: Sequence[tuple[int, str]]) -> tuple[int, str, str] | None:
    """nvidia-smi -q: the "FB Memory Usage" section whose Total has no value."""
    left = 0
    for n, t in window:
        body = lineprefix.body(lineprefix.clean(t)).strip()
        if _Q_SECTION.match(body):
            left = 4
            continue
        if left:
            left -= 1
            m = _Q_ROW.match(body)
            if m is not None and m["k"] == "Total":
                if m["v"] in _NO_VALUE:
                    return n, f"nvidia-smi -q gives FB Memory Usage's Total as {m['v']}: this GPU reports no memory of its own", \
                        t.strip()
                left = 0
    return None


def gpu_memory_unreported(window: Sequence[tuple[int, str]]) -> tuple[int, str, str] | None:
    """(line, why, text) when nvidia-smi gives no value for a GPU's memory, in its CSV (a memory
    field named on the command line or the header, the value in the row under it) or in its table
    (the Memory-Usage column): the fact is split over two lines, which one-line patterns cannot
    read.  A number there (any discrete GPU) is nothing."""
    table = _table_memory_unreported(window) or _query_memory_unreported(window)
    if table is not None:
        return table
    fields: list[str] = []
    left = 0
    for n, t in window:
        body = lineprefix.body(lineprefix.clean(t))
        m = _QUERY_FIELDS.search(body)
        if m is not None or ("memory." in body and _CSV_HEADER.match(body)):
            names = m.group(1).split(",") if m is not None else [c.split(" [")[0].strip() for c in body.split(",")]
            fields, left = [f.strip() for f in names], 8  # the rows follow within a few lines
            continue
        if not left:
            continue
        left -= 1
        values = [v.strip() for v in body.split(",")]
        if len(values) != len(fields):
            continue
        for name, value in zip(fields, values):
            if name in _MEM_FIELDS and value in _NO_VALUE:
                return n, f"nvidia-smi gives {name} as {value}: this GPU reports no memory of its own", t.strip()
    return None


_CONNECT = re.compile(r"(?i)\bconnect")
# the errnos of a connect to a peer that is not there (refused, unreachable, timed out, a name that
# does not resolve); an address family the host lacks (EAFNOSUPPORT) is torch probing IPv6 before it
# falls back to IPv4, and a bind's EADDRINUSE/EADDRNOTAVAIL is no connect
_CONNECT_ERRNOS = ("ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "ETIMEDOUT", "the rendezvous host name")


def retrying_connect(window: Sequence[tuple[int, str]], known: Iterable[str]) -> tuple[int, str, str, str] | None:
    """(line, id, why, text) when the log stops while a socket connect is being retried: its last
    non-blank line is a connect that failed with an errno, at whatever level (a connect that will be
    retried is logged as a warning; several ranks print the same line).  The errno names the cause
    (ECONNREFUSED: nothing listens there; EHOSTUNREACH: no route; ...); the log stopping there says
    the connect never succeeded."""
    rows = _nonblank(window)
    if not rows:
        return None
    n, t, _, body = rows[-1]
    if not _CONNECT.search(body) or not _NET_CONTEXT.search(body):
        return None
    ids = set(known)
    for rx, fid, why in _ERRNO:
        if fid in ids and why.startswith(_CONNECT_ERRNOS) and rx.search(body):
            return n, fid, f"{why} (the log stops while the connect is retried)", t.strip()
    return None


# the KV cache's size as the engine printed it (vLLM's concurrency at the longest request, its GPU
# blocks, its KV memory; SGLang's profiled token count): numbers, whatever the sentence
_KV_SIZE = re.compile(
    r"\bMaximum concurrency for [\d,]+ tokens per request: (?P<conc>[\d.]+)x"
    r"|# GPU blocks: (?P<blocks>-?\d+)\b"
    r"|\bAvailable KV cache memory: (?P<gib>-?[\d.]+) GiB"
    r"|\b(?:the )?profiled value (?P<profiled>-?\d+)\b|\bmax_total_num_tokens=(?P<total>-?\d+)\b")


def kv_too_small(window: Sequence[tuple[int, str]]) -> tuple[int, str, str, str] | None:
    """(line, "kv_cache_oom", why, text) when the engine's own numbers say its KV cache cannot hold
    one request: a concurrency below 1x at the longest request, no GPU blocks, a KV memory or a
    profiled token budget of zero or less; None otherwise."""
    for n, t in reversed(window):
        if "oncurrency" not in t and "blocks" not in t and "KV cache memory" not in t and "profiled" not in t \
                and "max_total_num_tokens" not in t:
            continue
        m = _KV_SIZE.search(t)
        if m is None:
            continue
        if m["conc"] is not None and float(m["conc"]) < 1.0:
            why = f"the KV cache holds {m['conc']}x of the longest request: not one fits"
        elif m["blocks"] is not None and int(m["blocks"]) <= 0:
            why = f"{m['blocks']} GPU blocks for the KV cache"
        elif m["gib"] is not None and float(m["gib"]) <= 0:
            why = f"{m['gib']} GiB left for the KV cache"
        elif (v := m["profiled"] or m["total"]) is not None and int(v) <= 0:
            why = f"a KV cache of {v} tokens"
        else:
            continue
        return n, "kv_cache_oom", why, t.strip()
    return None


# a connect (a join, a reach) that failed, in a line of any level or wording
_CONNECT_FAIL = re.compile(
    r"(?i)\b(?:fail(?:ed|ure|s)?|unable|could ?n[o']t|cannot|can't|timed out|timeout)\b[^\n]{0,40}?\b(?:to )?(?:connect|reach|join)\w*"
    r"|\bconnect\w*\b[^\n]{0,80}?\b(?:failed|refused|timed out|timeout|unreachable)\b")
# a retry counter: "Retrying ... 5/6", "attempt 3 of 10", "retry 2 out of 5"
_RETRY_COUNT = re.compile(r"(?i)\b(?:retry|retrying|retries|attempt|attempts|trial)\b[^\n]{0,80}?\b(?P<k>\d{1,4}) ?(?:/|of|out of) ?(?P<n>\d{1,4})\b")
# a wait loop's words (the same line printed again and again, only its numbers changing)
_WAITING = re.compile(r"(?i)\bwaiting (?:for|on|until)\b|\bretrying\b|\bretry in\b|\bunable to\b|\bfailed to\b"
                      r"|\bnot (?:yet )?(?:ready|available)\b")
_NUMBERS = re.compile(r"\d+(?:[.,:]\d+)*|0x[0-9a-f]+")
# what was waited for, by what the line names: (pattern, id)
_AWAITED = (
    (re.compile(r"(?i)\bGCS\b|\braylet\b|\bray (?:cluster|head)\b"), "ray_gcs_unreachable"),
    (re.compile(r"(?i)\bplacement group\b"), "ray_placement_group_stuck"),
    (re.compile(r"(?i)\brendezvous\b|\bTCPStore\b|\bc10d\b|\bMASTER_ADDR\b|\binit_process_group\b"
                r"|\b(?:tcp )?store\b"), "rendezvous_timeout"),
)


def stopped_waiting(window: Sequence[tuple[int, str]], known: Iterable[str]) -> tuple[int, str, str, str] | None:
    """(line, id, why, text) when a log stops while its program waits for something that never
    came, at whatever level and in whatever words: its last line a connect that failed (no errno
    needed), a retry counter (k of n), or the same waiting line again and again with only its
    numbers changing.  The id is named by what was awaited (Ray's GCS, a placement group, the
    rendezvous store), else ``unrecognised_failure``: a warning, the program may still get there."""
    rows = _nonblank(window)
    noise = teardown(rows)
    rows = [r for r in rows if r[0] not in noise][-LAST:]
    if not rows:
        return None
    ids = set(known)
    what = ""
    hit: tuple[int, str, str, str] | None = None
    tail = rows[-2:]
    for r in reversed(tail):
        body = r[3]
        if _QUIET_BRACKET.search(body):
            continue  # torch c10d's own [W ...] socket notices: a connect it retries another way
        if _CONNECT_FAIL.search(body):
            hit, what = r, "the log stops at a connect that failed"
            break
        m = _RETRY_COUNT.search(body)
        # at least half of its retries spent (a slow start-up polls on at 10 of 100)
        if m is not None and 0 < int(m["n"]) <= 2 * int(m["k"]) and int(m["k"]) <= int(m["n"]):
            hit, what = r, f"the log stops at retry {m['k']} of {m['n']}"
            break
    if hit is None:
        same = [r for r in rows if _NUMBERS.sub("#", r[3]) == _NUMBERS.sub("#", rows[-1][3])]
        if len(same) >= 3 and _WAITING.search(rows[-1][3]) and rows[-len(same):] == same[-len(same):]:
            hit, what = rows[-1], f"the log stops in a wait loop ({len(same)} times the same line)"
    if hit is None:
        return None
    near = " ".join(r[3] for r in rows[-4:])
    for rx, fid in _AWAITED:
        if fid in ids and rx.search(near):
            return hit[0], fid, what, hit[1].strip()
    if "unrecognised_failure" in ids:
        return hit[0], "unrecognised_failure", what, hit[1].strip()
    return None


# /dev/shm's size as a user's paste shows it: df's row (-h: "64M"; plain: 1K blocks), mount's tmpfs
# options, docker inspect's HostConfig.ShmSize (bytes; moot where the container shares the host's IPC)
_SHM_DF = re.compile(r"^\S+\s+(?P<size>\d+(?:\.\d+)?)(?P<unit>[KMG]?)\s+\S+\s+\S+\s+\d+%\s+/dev/shm\s*$")
_SHM_MOUNT = re.compile(r"\bon /dev/shm type tmpfs \([^)\n]*\bsize=(?P<size>\d+)(?P<unit>[kmg]?)[,)]")
_SHM_INSPECT = re.compile(r'"ShmSize":\s*(?P<size>\d+)')
_IPC_HOST = re.compile(r'"IpcMode":\s*"host"|--ipc[= ]host\b')
# (df's plain number is 1K blocks; mount's size= without a suffix is bytes)
_SHM_UNIT = {"": 1024, "K": 1024, "k": 1024, "M": 1 << 20, "m": 1 << 20, "G": 1 << 30, "g": 1 << 30}
# at most this much /dev/shm is "small": Docker's default is 64 MiB; NCCL and vLLM want GiBs
SHM_SMALL = 512 << 20


def shm_small(window: Sequence[tuple[int, str]]) -> tuple[int, str, str] | None:
    """(line, why, text) when the paste shows a /dev/shm of at most SHM_SMALL, else None."""
    host_ipc = any(_IPC_HOST.search(t) for _, t in window)
    for n, t in window:
        if "/dev/shm" not in t and "ShmSize" not in t:
            continue
        body = lineprefix.body(lineprefix.clean(t)).strip()
        m = _SHM_DF.match(body)
        size = float(m["size"]) * _SHM_UNIT[m["unit"]] if m is not None else None
        if m is None and (m := _SHM_MOUNT.search(body)) is not None:
            size = float(m["size"]) * (_SHM_UNIT[m["unit"]] if m["unit"] else 1)
        if m is None and not host_ipc and (i := _SHM_INSPECT.search(body)) is not None:
            size = float(i["size"])
        if size is not None and 0 < size <= SHM_SMALL:
            return n, f"/dev/shm is {size / (1 << 20):.0f} MiB here (Docker's default is 64 MiB)", t.strip()
    return None


# a memory amount a program says it has (available, free, MemAvailable) and one it plans to reach
# (a projected or estimated peak, what it requires): "MemAvailable=59.0 GB", "projected peak 98.5 GB"
_MEM_HAVE = re.compile(r"(?i)\b(?:MemAvailable|available(?: memory| RAM)?|free(?: memory| RAM)?)\s*[=:]?\s*"
                       r"(?P<v>\d+(?:\.\d+)?)\s?(?P<u>[GT]i?B)\b")
_MEM_PLAN = re.compile(r"(?i)\b(?:projected|estimated|expected|predicted) (?:peak|usage|total|memory)(?: usage)?\s*[=:]?\s*"
                       r"(?P<v>\d+(?:\.\d+)?)\s?(?P<u>[GT]i?B)\b")
_UNIFIED = re.compile(r"(?i)\bunified[ /-]memory\b|\bintegrated(?:/unified)? memory\b|\bGB10\b|\bGrace Blackwell\b")


def _gib(v: str, u: str) -> float:
    return float(v) * (1024 if u[0] in "Tt" else 1)


def memory_overplanned(window: Sequence[tuple[int, str]]) -> tuple[int, str, str] | None:
    """(line, why, text) when a program on unified memory plans a peak above the memory it says is
    available (both figures in its own log, compared across lines), else None."""
    if not any(_UNIFIED.search(t) for _, t in window):
        return None
    have: tuple[int, float] | None = None
    for n, t in window:
        m = _MEM_HAVE.search(t)
        if m is not None:
            have = (n, _gib(m["v"], m["u"]))
        p = _MEM_PLAN.search(t)
        if p is not None and have is not None and _gib(p["v"], p["u"]) > have[1] * 1.05:
            return n, (f"it plans a peak of {p['v']} {p['u']} with {have[1]:g} GB available "
                       f"(line {have[0]}) on unified memory"), t.strip()
    return None


def silent_facts(window: Sequence[tuple[int, str]], known: Iterable[str]) -> tuple[int, str, str, str, str] | None:
    """For a log that nothing else spoke about (no failure shape, no finding): (line, id, why, text,
    severity) of a fact that names a cause by itself.  The kernel's impossible CMA numbers (an
    error: the machine cannot work); a terminal fact among its last lines, or a native extension's
    undefined symbol logged at WARNING: warnings, since the log shows no failure (a healthy start-up
    retries refused connects, a program goes on past a missing optional symbol)."""
    ids = set(known)
    last = {n for n, *_ in _nonblank(window)[-LAST:]}
    cma = cma_broken(window) if "gb10_kernel_unsupported" in ids else None
    if cma is not None:
        return cma[0], "gb10_kernel_unsupported", cma[1], dict(window).get(cma[0], "").strip(), "error"
    got = facts([x for x in window if x[0] in last], ids, terminal=True)
    if got is not None:
        return (*got, "warning")
    got = retrying_connect(window, ids)
    if got is not None:
        return (*got, "warning")
    got = facts(window, QUIET_FACT_IDS & ids, quiet=True) or facts(window, ids, quiet=True, whys=QUIET_FACT_WHYS)
    if got is not None:
        return (*got, "warning")
    got = kv_too_small(window) if "kv_cache_oom" in ids else None
    if got is not None:
        return (*got, "warning")
    got = stopped_waiting(window, ids)
    if got is not None:
        return (*got, "warning")
    got = shm_small(window) if "shm_too_small" in ids else None
    if got is not None:
        return got[0], "shm_too_small", got[1], got[2], "warning"
    got = memory_overplanned(window) if "unified_memory_pressure" in ids else None
    if got is not None:
        return got[0], "unified_memory_pressure", got[1], got[2], "warning"
    got = gpu_memory_unreported(window) if "gb10_memory_not_supported" in ids else None
    if got is not None:
        return got[0], "gb10_memory_not_supported", got[1], got[2], "info"
    return None
