"""Runs ON THE SOURCE NODE between ``docker save`` and the copy (``python3 -c <this file> PLAN``):
passes the saved image's tar through, leaving out the layers the target already holds.

Why: a patched image shares every layer but its last few with the base image the target has, and
``docker load`` never opens the file of a layer whose chain its layer store already has (moby's
``image/tarexport/load.go``: ``lss.Get(chainID)`` first, ``loadLayer`` only when that fails).  So
the copy needs only the new layers: megabytes instead of the whole image.

PLAN is JSON: ``{"blobs": [...], "chains": [...]}``.
- ``blobs``: tar member names to leave out as they are (Docker >= 25 saves an OCI layout whose
  layer files are ``blobs/sha256/<diffID>``);
- ``chains``: chain IDs the target holds.  Docker <= 24 names a layer's folder by its v1 ID, a
  digest of that folder's ``json`` with the layer's chain ID added (``CreateID`` in
  distribution/metadata v1); the ``json`` comes before ``layer.tar`` in the folder, so each folder's
  ID is recomputed from its own ``json`` for every held chain, and its ``layer.tar`` is left out only
  on an exact match.  A digest that matches nothing (another Docker's encoding) sends the layer:
  the copy is then bigger, never wrong.

Standard library only, no sparktui import: the node has Python 3 but not our package.  Prints
``SPARKTUI-SKIPPED <layers> <bytes>`` on stderr at the end.
"""

import hashlib
import json
import sys

BLOCK = 512
CHUNK = 1 << 20
JSON_MAX = 1 << 20  # a layer folder's json is ~0.5-2 KB; a bigger one is passed, not read


def go_json(value):
    # Go's encoding/json: compact, keys of a map sorted, <>& and U+2028/9 escaped, UTF-8 kept
    if isinstance(value, dict):
        return "{" + ",".join(go_json(k) + ":" + go_json(v) for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    text = json.dumps(value, ensure_ascii=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def v1_id_chain(raw, chains):
    """The held chain ID a folder's json was made from, or None.  CreateID hashes the v1 image with
    its id cleared, ``layer_id`` (the chain ID) and ``parent`` (a digest) added, keys sorted; some
    Dockers set ``os`` only after hashing, so the digest is tried with and without it."""
    try:
        doc = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        return None
    want = doc.pop("id")
    if isinstance(doc.get("parent"), str):
        doc["parent"] = "sha256:" + doc["parent"]
    variants = [doc]
    if "os" in doc:
        variants.append({k: v for k, v in doc.items() if k != "os"})
    for chain in chains:
        for base in variants:
            m = dict(base, layer_id=chain)
            body = "{" + ",".join(go_json(k) + ":" + go_json(m[k]) for k in sorted(m)) + "}"
            if hashlib.sha256(body.encode("utf-8")).hexdigest() == want:
                return chain
    return None


def octal_or_binary(field):
    if field[:1] and field[0] & 0x80:  # base-256 (GNU), for sizes past 8 GiB
        n = field[0] & 0x7F
        for b in field[1:]:
            n = (n << 8) | b
        return n
    text = field.split(b"\0", 1)[0].strip()
    return int(text, 8) if text else 0


def pax_records(data):
    out, i = {}, 0
    while i < len(data):
        sp = data.find(b" ", i)
        if sp < 0:
            break
        try:
            n = int(data[i:sp])
        except ValueError:
            break
        if n <= 0:
            break
        rec = data[sp + 1:i + n - 1]
        key, _, value = rec.partition(b"=")
        out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
        i += n
    return out


class Tar:
    def __init__(self, inp, out):
        self.inp, self.out = inp, out

    def read(self, n):
        buf = bytearray()
        while len(buf) < n:
            got = self.inp.read(n - len(buf))
            if not got:
                raise EOFError("the saved image's tar ended in the middle of a member")
            buf += got
        return bytes(buf)

    def copy(self, n, write=True):
        while n > 0:
            got = self.inp.read(min(CHUNK, n))
            if not got:
                raise EOFError("the saved image's tar ended in the middle of a member")
            if write:
                self.out.write(got)
            n -= len(got)


def filter_tar(inp, out, blobs, chains):
    """Copy the tar from ``inp`` to ``out`` leaving out held layers; returns (layers, bytes) left out."""
    tar = Tar(inp, out)
    skip_dirs = set()
    skipped = skipped_bytes = 0
    held = b""  # pax / GNU long-name headers: they belong to the member after them
    pax = {}
    longname = None
    while True:
        head = inp.read(BLOCK)
        if not head:
            break
        if len(head) < BLOCK:
            head += tar.read(BLOCK - len(head))
        if head == b"\0" * BLOCK:  # the end: pass it and whatever follows through unchanged
            out.write(held + head)
            while True:
                rest = inp.read(CHUNK)
                if not rest:
                    break
                out.write(rest)
            break
        kind = head[156:157]
        size = octal_or_binary(head[124:136])
        if kind in (b"x", b"L", b"K"):
            data = tar.read(-(-size // BLOCK) * BLOCK)
            if kind == b"x":
                pax = pax_records(data[:size])
            elif kind == b"L":
                longname = data[:size].rstrip(b"\0").decode("utf-8", "replace")
            held += head + data
            continue
        name = head[0:100].split(b"\0", 1)[0].decode("utf-8", "replace")
        prefix = head[345:500].split(b"\0", 1)[0].decode("utf-8", "replace") if head[257:262] == b"ustar" else ""
        if prefix:
            name = prefix + "/" + name
        name = pax.get("path") or longname or name
        if "size" in pax:
            size = int(pax["size"])
        pax, longname = {}, None
        padded = -(-size // BLOCK) * BLOCK
        folder, _, leaf = name.rstrip("/").rpartition("/")
        if kind in (b"0", b"\0") and (name in blobs or (leaf == "layer.tar" and folder in skip_dirs)):
            tar.copy(padded, write=False)
            held = b""
            skipped += 1
            skipped_bytes += size
            continue
        out.write(held + head)
        held = b""
        if kind in (b"0", b"\0") and leaf == "json" and folder and "/" not in folder and size <= JSON_MAX:
            data = tar.read(padded)
            out.write(data)
            if chains and v1_id_chain(data[:size], chains):
                skip_dirs.add(folder)
            continue
        tar.copy(padded)
    out.flush()
    return skipped, skipped_bytes


def main(argv):
    plan = json.loads(argv[1]) if len(argv) > 1 else {}
    blobs, chains = set(plan.get("blobs") or ()), list(plan.get("chains") or ())
    try:
        layers, size = filter_tar(sys.stdin.buffer, sys.stdout.buffer, blobs, chains)
    except BrokenPipeError:
        return 1
    except EOFError as exc:
        sys.stderr.write("layer_skip: %s\n" % exc)
        return 1
    sys.stderr.write("SPARKTUI-SKIPPED %d %d\n" % (layers, size))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
