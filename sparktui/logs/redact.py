"""Secrets stay secret: one masking function for every place text leaves the process.

Session logs, ``events.jsonl``, reports, ``diagnose`` output, the TUI's log store (screen and
save-log export) all go through :func:`redact`.  It masks the *value* and keeps the name, so a
reader still sees that a token was set (``HF_TOKEN=***``, ``--api-key ***``,
``"api_key": "***"``, ``Authorization: Bearer ***``) and bare token shapes (``hf_…``, ``sk-…``,
``ghp_…``) wherever they appear.

It runs on every ingested log batch, so the common case (no secret-looking word at all) is one
lower-casing and a few substring tests; the regexes run only on text that could hold a secret.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

MASK = "***"

# Names that hold a secret: the key *ends* with one of these words (HF_TOKEN, VLLM_API_KEY,
# client_secret, --hf-token), so max_num_batched_tokens, tokenizer and HF_TOKEN_PATH stay readable.
# Each word is its own pattern led by a literal (look-behinds after it): the regex engine then
# searches for the literal quickly instead of trying an alternation at every position.
_WORD_PATTERNS = {
    b"token": rb"token(?<!bos_token)(?<!eos_token)(?<!pad_token)(?<!unk_token)(?<!sep_token)(?<!cls_token)(?<!mask_token)",
    b"key": rb"key(?:(?<=api_key)|(?<=api-key)|(?<=apikey)|(?<=access_key)|(?<=access-key)"
            rb"|(?<=private_key)|(?<=private-key)|(?<=secret_key)|(?<=secret-key))",
    b"secret": rb"secret",
    b"passw": rb"passw(?:or)?d",
    b"credential": rb"credentials?",
    b"authorization": rb"authorization",
}
_WORDS = rb"(?:" + rb"|".join(_WORD_PATTERNS.values()) + rb")"
# a value: quoted string, list literal, or a bare word up to whitespace/punctuation
_VALUE = rb"(?P<val>\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|\[[^\]\n]*\]|[^\s\"',;&)}\]]+)"
_SCHEME = rb"(?:(?:bearer|basic|token)[ \t]+)?"

# All of these run on the ASCII-lower-cased UTF-8 bytes (bytes.lower() keeps every offset, is fast,
# and needs no re.IGNORECASE); the value spans found there are masked in the original bytes.
# NAME=value, NAME: value, "NAME": "value", 'name': ['value'], Authorization: Bearer value
_KV = tuple((word, re.compile(rx + rb"(?![a-z0-9])[\"']?[ \t]*[:=][ \t]*" + _SCHEME + _VALUE))
            for word, rx in _WORD_PATTERNS.items())
# command-line flags: --api-key X, --api-key=X, --hf-token X, and argv lists "--api-key", "X"
_FLAG = re.compile(rb"-(?<![\w-]-)-?(?:[a-z0-9]+[_-])*[a-z0-9]*" + _WORDS
                   + rb"(?![\w-])(?:[ \t]*=[ \t]*|[ \t]+|[\"']?[ \t]*,[ \t]*[\"']?)" + _VALUE)
_BEARER = re.compile(rb"bearer(?<![a-z0-9]bearer)[ \t]+(?P<val>[a-z0-9._~+/=-]{8,})")
_URL_CRED = re.compile(rb"://[^/\s:@]+:(?P<val>[^@\s/]+)(?=@)")  # scheme://user:password@host
# token shapes, wherever they stand: Hugging Face, OpenAI-style, GitHub personal, AWS access key id
# (each shape costs one scan of every batch in the pre-test: the list is kept to the common ones).
# Each is led by its literal, the "no letter before" test after it: one regex led by a look-behind
# and an alternation was tried at every position (23 MB/s, most of a core under a log flood).
_SHAPE_RXS = tuple((lead.lower(), re.compile(lead + rb"(?<![A-Za-z0-9]" + lead + rb")" + rest + rb"(?![A-Za-z0-9])"))
                   for lead, rest in ((rb"hf_", rb"[A-Za-z0-9]{20,}"), (rb"sk-", rb"[A-Za-z0-9_-]{16,}"),
                                      (rb"ghp_", rb"[A-Za-z0-9]{20,}"), (rb"github_pat_", rb"[A-Za-z0-9_]{20,}"),
                                      (rb"AKIA", rb"[0-9A-Z]{16}")))  # (trigger in the lowered text, regex)

_TRIGGERS = (b"token", b"key", b"secret", b"passw", b"credential", b"authoriz", b"bearer", b"://",
             *(trigger for trigger, _ in _SHAPE_RXS))
# values that say "not set" rather than hold a secret: masking them would hide a useful fact
_NOT_SECRET = {"", "none", "null", "nil", "true", "false", "unset", "<none>", MASK}
_NUMBER = re.compile(r"[-+]?[\d.]+")


def _masked_value(val: bytes) -> bytes:
    if val[:1] in (b'"', b"'") and len(val) >= 2:
        return val[:1] + MASK.encode() + val[:1]
    if val[:1] == b"[":
        return b"[" + MASK.encode() + b"]"
    return MASK.encode()


def _keep(val: str, numbers: bool = True) -> bool:
    """A value that is no secret: "not set" words, and (after a bare name, not a flag) plain numbers
    ("first token: 0.31" is a latency; "--api-key 1234" is a key)."""
    v = val.strip("\"'[]")
    return v.lower() in _NOT_SECRET or (numbers and bool(_NUMBER.fullmatch(v)))


def redact_bytes(data: bytes) -> bytes:
    """UTF-8 ``data`` with secret values masked (names kept); the same object when nothing matched."""
    low = data.lower()
    if not any(w in low for w in _TRIGGERS):  # the common case: a few fast substring scans
        return data
    for trigger, rx in _SHAPE_RXS:
        if trigger in low:
            masked = rx.sub(MASK.encode(), data)
            if masked != data:
                data, low = masked, masked.lower()
    rxs = []
    if b"=" in low or b":" in low:
        rxs += [rx for word, rx in _KV if word in low]
    if b"-" in low:
        rxs.append(_FLAG)
    if b"bearer" in low:
        rxs.append(_BEARER)
    if b"://" in low and b"@" in low:
        rxs.append(_URL_CRED)
    spans = []
    for rx in rxs:
        for m in rx.finditer(low):
            a, b = m.span("val")
            if not _keep(data[a:b].decode("utf-8", "replace"), numbers=rx is not _FLAG):
                spans.append((a, b))
    if not spans:
        return data
    spans.sort()
    out = []
    pos = 0
    for a, b in spans:
        if a < pos:  # the same value found by two forms (--api-key=x is a flag and a NAME=value)
            continue
        out += (data[pos:a], _masked_value(data[a:b]))
        pos = b
    out.append(data[pos:])
    return b"".join(out)


def redact(text: str) -> str:
    """``text`` with secret values masked (names kept); the same object when nothing matched."""
    data = text.encode("utf-8", "surrogateescape")
    out = redact_bytes(data)
    return text if out is data else out.decode("utf-8", "surrogateescape")


def redact_lines(texts: list[str]) -> list[str]:
    """A batch of single lines (no newline inside), redacted with one pre-test for the batch."""
    if not texts:
        return texts
    joined = "\n".join(texts)
    out = redact(joined)
    return texts if out is joined else out.split("\n")


_WORDS_STR = _WORDS.decode()
_KEY_ONLY = re.compile(_WORDS_STR + r"$", re.I)
_FLAG_ONLY = re.compile(r"--?(?:[A-Za-z0-9]+[_-])*[A-Za-z0-9]*" + _WORDS_STR, re.I)


def is_secret_key(name: str) -> bool:
    """An env/dict key or flag name that holds a secret (HF_TOKEN, api_key, --api-key)."""
    return bool(_KEY_ONLY.search(name.strip().lstrip("-")))


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (MASK if is_secret_key(k) else v) for k, v in env.items()}


def redact_argv(argv: Iterable[str]) -> list[str]:
    """An argument list with each secret flag's value masked (``["--api-key", "x"]``)."""
    return mask_list([redact(a) for a in argv])


def mask_list(items: list) -> list:
    """The list-level rules only (its strings are redacted already): the value after a secret flag,
    and the value of a ``[key, value]`` pair (a label) whose key names a secret."""
    if not items or not all(isinstance(x, str) for x in items):
        return items
    if len(items) == 2 and is_secret_key(items[0]) and not _keep(items[1]):
        return [items[0], MASK]
    out = list(items)
    for i in range(len(out) - 1):
        if _FLAG_ONLY.fullmatch(out[i]) and not out[i + 1].startswith("--") and not _keep(out[i + 1]):
            out[i + 1] = MASK
    return out


def mask_dict(d: dict) -> dict:
    """The dict-level rule only: a string value under a key that names a secret."""
    return {k: (MASK if isinstance(k, str) and isinstance(v, str) and is_secret_key(k) and not _keep(v) else v)
            for k, v in d.items()}


def redact_obj(obj: Any) -> Any:
    """JSON-like data (dicts, lists, strings) with secrets masked: secret keys, flag lists, text."""
    if isinstance(obj, str):
        return redact(obj)
    if isinstance(obj, dict):
        return mask_dict({k: redact_obj(v) for k, v in obj.items()})
    if isinstance(obj, (list, tuple)):
        return mask_list([redact_obj(x) for x in obj])
    return obj
