#!/usr/bin/env python3
"""Add missing model architectures to an image's vLLM model registry and transformers config map.

Runs inside an image build (``RUN python3 patch_vllm_registry.py ...``), stdlib only.

  patch_vllm_registry.py --arch Qwen3_5MoeForConditionalGeneration=qwen3_5:Qwen3_5MoeForConditionalGeneration \\
                         --model-type qwen3_5_moe=Qwen3_5MoeConfig [--registry FILE] [--config-map FILE]

What it edits (the layouts it knows; anything else is refused, the file left untouched):
- vLLM ``vllm/model_executor/models/registry.py``: module-level dict literals
  ``_TEXT_GENERATION_MODELS = {`` / ``_MULTIMODAL_MODELS = {`` holding
  ``"Arch": ("module", "Class"),`` entries.  ``*ForConditionalGeneration`` goes to the multimodal
  dict when there is one (that is where vLLM keeps Qwen3.5), everything else to text generation.
- transformers ``models/auto/configuration_auto.py`` (``auto_mappings.py`` beside it in transformers
  5.x): ``CONFIG_MAPPING_NAMES = OrderedDict(...([`` holding ``("model_type", "ConfigClass"),`` tuples.

Idempotent: entries already present are left as they are.  After writing, the result is verified by
importing the module (by its package name when it lies under a sys.path entry, else from its file)
and reading the dict back.  Exit codes: 0 patched or already present, 1 verification failed,
2 bad arguments, 3 unknown file layout / file not found.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

REGISTRY_REL = ("vllm", "model_executor", "models", "registry.py")
CONFIG_MAP_REL = ("transformers", "models", "auto", "configuration_auto.py")
TEXT_DICT = "_TEXT_GENERATION_MODELS"
MM_DICT = "_MULTIMODAL_MODELS"
CONFIG_MAP = "CONFIG_MAPPING_NAMES"
AUTO_MAPPINGS = "auto_mappings.py"  # where transformers 5.x defines CONFIG_MAPPING_NAMES
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class LayoutError(Exception):
    """The file is not shaped the way this script knows; nothing was written."""


def find_package_file(rel: tuple[str, ...]) -> Path | None:
    """Locate a file of an installed package without importing it (vLLM imports torch)."""
    spec = importlib.util.find_spec(rel[0])
    if spec is None or not spec.submodule_search_locations:
        return None
    for base in spec.submodule_search_locations:
        p = Path(base, *rel[1:])
        if p.is_file():
            return p
    return None


def _dict_literals(tree: ast.Module) -> dict[str, ast.Dict]:
    out: dict[str, ast.Dict] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if isinstance(node.value, ast.Dict):
                out[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(node.value, ast.Dict):
            out[node.target.id] = node.value
    return out


def registry_keys(text: str) -> dict[str, set[str]]:
    """Architecture names per registry dict, read from source (no import)."""
    tree = ast.parse(text)
    keys: dict[str, set[str]] = {}
    for name, d in _dict_literals(tree).items():
        if name in (TEXT_DICT, MM_DICT) or name.startswith("_") and name.endswith("_MODELS"):
            keys[name] = {k.value for k in d.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return keys


def patch_registry_text(text: str, arches: list[tuple[str, str, str]]) -> tuple[str, list[str]]:
    """Return (new text, names added).  Raises LayoutError on an unknown layout."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise LayoutError(f"not valid Python ({exc.msg}, line {exc.lineno})") from None
    dicts = _dict_literals(tree)
    if TEXT_DICT not in dicts:
        raise LayoutError(f"no module-level `{TEXT_DICT} = {{...}}` dict literal: unknown registry layout")
    known = set().union(*registry_keys(text).values())
    lines = text.splitlines(keepends=True)
    added: list[str] = []
    # insert bottom-up so earlier line numbers stay valid
    inserts: list[tuple[int, str]] = []
    for arch, module, cls in arches:
        if arch in known:
            continue
        target = MM_DICT if arch.endswith("ForConditionalGeneration") and MM_DICT in dicts else TEXT_DICT
        d = dicts[target]
        end_line = d.end_lineno  # the line holding the closing brace
        closing = lines[end_line - 1]
        if closing.strip() != "}":
            raise LayoutError(f"`{target}` does not end with a lone '}}' line (line {end_line}): unknown layout")
        indent = "    "
        if d.keys and d.keys[-1] is not None:
            first = lines[d.keys[-1].lineno - 1]
            indent = first[: len(first) - len(first.lstrip())] or indent
        inserts.append((end_line - 1, f'{indent}"{arch}": ("{module}", "{cls}"),  # added by sparktui\n'))
        known.add(arch)
        added.append(arch)
    by_line: dict[int, list[str]] = {}
    for idx, line in inserts:  # same-dict entries keep the order given
        by_line.setdefault(idx, []).append(line)
    for idx in sorted(by_line, reverse=True):
        lines[idx:idx] = by_line[idx]
    return "".join(lines), added


def config_map_entries(text: str) -> dict[str, str]:
    tree = ast.parse(text)
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id == CONFIG_MAP:
                lst = _list_of_pairs(node.value)
                if lst is None:
                    raise LayoutError(f"`{CONFIG_MAP}` is not OrderedDict([...(\"type\", \"Config\")...]): unknown layout")
                return {a: b for a, b in _pairs(lst)}
    raise LayoutError(f"no module-level `{CONFIG_MAP}`: unknown config map layout")


def _list_of_pairs(value: ast.AST | None) -> ast.List | None:
    # OrderedDict([...]) or OrderedDict[str, str]([...])
    if isinstance(value, ast.Call) and len(value.args) == 1 and isinstance(value.args[0], ast.List):
        return value.args[0]
    return None


def _pairs(lst: ast.List):
    for elt in lst.elts:
        if (isinstance(elt, ast.Tuple) and len(elt.elts) == 2
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elt.elts)):
            yield elt.elts[0].value, elt.elts[1].value


def patch_config_map_text(text: str, types: list[tuple[str, str]]) -> tuple[str, list[str]]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise LayoutError(f"not valid Python ({exc.msg}, line {exc.lineno})") from None
    known = config_map_entries(text)
    lst = None
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and target.id == CONFIG_MAP:
                lst = _list_of_pairs(node.value)
    assert lst is not None
    lines = text.splitlines(keepends=True)
    if not lst.elts:
        raise LayoutError(f"`{CONFIG_MAP}` is empty: unknown layout")
    last = lst.elts[-1]
    tail = lines[last.end_lineno - 1]
    if not tail.split("#", 1)[0].rstrip().endswith("),"):
        raise LayoutError(f"`{CONFIG_MAP}` entries are not one `(\"a\", \"B\"),` per line: unknown layout")
    indent = tail[: len(tail) - len(tail.lstrip())]
    added, new = [], []
    for mtype, cls in types:
        if mtype in known:
            continue
        new.append(f'{indent}("{mtype}", "{cls}"),  # added by sparktui\n')
        known[mtype] = cls
        added.append(mtype)
    lines[last.end_lineno:last.end_lineno] = new
    return "".join(lines), added


def _module_name_for(path: Path) -> str | None:
    """The dotted name the file imports under: from the deepest sys.path entry holding it (a script
    in / must not make /opt/x/site/vllm/... the module ``opt.x.site.vllm...``)."""
    path = path.resolve()
    best: tuple[str, ...] | None = None
    for entry in sys.path:
        if not entry:
            continue
        try:
            rel = path.relative_to(Path(entry).resolve())
        except (ValueError, OSError):
            continue
        parts = rel.with_suffix("").parts
        if all(_IDENT.match(p) for p in parts) and (best is None or len(parts) < len(best)):
            best = parts
    return ".".join(best) if best else None


_VERIFY = r"""
import importlib, importlib.util, json, sys
path, modname, attrs = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
if modname:
    mod = importlib.import_module(modname)
else:
    spec = importlib.util.spec_from_file_location("sparktui_verify", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
keys = set()
for a in attrs:
    keys.update(dict(getattr(mod, a, {}) or {}).keys())
print(json.dumps(sorted(keys)))
"""


def verify_by_import(path: Path, attrs: list[str], wanted: list[str]) -> str | None:
    """Import the patched module in a fresh interpreter; return an error text or None."""
    modname = _module_name_for(path) or ""
    proc = subprocess.run([sys.executable, "-c", _VERIFY, str(path), modname, ",".join(attrs)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"importing {modname or path} failed: {last}"
    try:
        keys = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        return f"importing {modname or path} printed nothing readable"
    missing = [w for w in wanted if w not in keys]
    return f"after import, still missing: {', '.join(missing)}" if missing else None


def _parse_arch(s: str) -> tuple[str, str, str]:
    # Arch=module:Class   (module/Class default to the arch's own name when omitted)
    arch, _, rest = s.partition("=")
    module, _, cls = rest.partition(":")
    cls = cls or arch
    if not (_IDENT.match(arch) and _IDENT.match(module or "x") and _IDENT.match(cls) and module):
        raise argparse.ArgumentTypeError(f"{s!r}: expected Arch=module:Class, e.g. "
                                         "Qwen3_5MoeForConditionalGeneration=qwen3_5:Qwen3_5MoeForConditionalGeneration")
    return arch, module, cls


def _parse_type(s: str) -> tuple[str, str]:
    mtype, _, cls = s.partition("=")
    if not (re.match(r"^[a-z0-9_\-]+$", mtype) and _IDENT.match(cls)):
        raise argparse.ArgumentTypeError(f"{s!r}: expected model_type=ConfigClass, e.g. qwen3_5_moe=Qwen3_5MoeConfig")
    return mtype, cls


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".sparktui-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)


def _plan(path: Path | None, rel, what: str, items, patch_fn):
    """Read and patch in memory; raises LayoutError before anything is written."""
    path = path or find_package_file(rel)
    if path is None or not path.is_file():
        raise LayoutError(f"{what} not found ({path or 'no installed ' + rel[0] + ' package'})")
    original = path.read_text(encoding="utf-8")
    new_text, added = patch_fn(original, items)
    if added:
        try:
            compile(new_text, str(path), "exec")  # never write something that does not parse
        except SyntaxError as exc:
            raise LayoutError(f"{path}: patched text would not parse ({exc.msg}); unknown layout") from None
    return path, original, new_text, added


def _plan_config_map(path: Path | None, types):
    """transformers < 5.x keeps the literal in configuration_auto.py; 5.x imports it there from
    auto_mappings.py beside it: patch whichever file holds it."""
    if path is not None:
        return _plan(path, CONFIG_MAP_REL, "transformers config map", types, patch_config_map_text)
    first = find_package_file(CONFIG_MAP_REL)
    if first is None:
        return _plan(None, CONFIG_MAP_REL, "transformers config map", types, patch_config_map_text)
    try:
        return _plan(first, CONFIG_MAP_REL, "transformers config map", types, patch_config_map_text)
    except LayoutError as exc:
        beside = first.with_name(AUTO_MAPPINGS)
        if not beside.is_file():
            raise
        try:
            return _plan(beside, CONFIG_MAP_REL, "transformers config map", types, patch_config_map_text)
        except LayoutError:
            raise exc from None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arch", action="append", type=_parse_arch, default=[], metavar="ARCH=module:Class")
    ap.add_argument("--model-type", action="append", type=_parse_type, default=[], metavar="TYPE=ConfigClass")
    ap.add_argument("--registry", type=Path, help="vLLM registry.py (default: found in the installed vllm)")
    ap.add_argument("--config-map", type=Path, help="transformers configuration_auto.py (default: found)")
    ap.add_argument("--skip-verify", action="store_true", help=argparse.SUPPRESS)
    try:
        args = ap.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    if not args.arch and not args.model_type:
        print("patch_vllm_registry: nothing to add (give --arch and/or --model-type)", file=sys.stderr)
        return 2
    plans = []  # (label, path, original, new_text, added, attrs, wanted)
    try:
        if args.arch:
            path, orig, new, added = _plan(args.registry, REGISTRY_REL, "vLLM registry", args.arch, patch_registry_text)
            plans.append(("architectures", path, orig, new, added, [TEXT_DICT, MM_DICT], [a for a, _, _ in args.arch]))
        if args.model_type:
            path, orig, new, added = _plan_config_map(args.config_map, args.model_type)
            plans.append(("model_types", path, orig, new, added, [CONFIG_MAP], [t for t, _ in args.model_type]))
    except LayoutError as exc:
        print(f"patch_vllm_registry: unknown layout, nothing changed: {exc}", file=sys.stderr)
        return 3
    except (OSError, UnicodeDecodeError) as exc:
        print(f"patch_vllm_registry: cannot read: {exc}", file=sys.stderr)
        return 3
    written = []
    try:
        for label, path, orig, new, added, attrs, wanted in plans:
            if added:
                _write_atomic(path, new)
                written.append((path, orig))
            err = None if args.skip_verify else verify_by_import(path, attrs, wanted)
            if err:
                raise RuntimeError(f"{path}: {err}")
            print(f"{label} {path}: " + (f"added {', '.join(added)}" if added else "already has every entry"))
    except (RuntimeError, OSError) as exc:
        for path, orig in written:  # leave nothing half-done
            _write_atomic(path, orig)
        print(f"patch_vllm_registry: failed, files restored: {exc}", file=sys.stderr)
        return 1
    results = {p[0]: p[4] for p in plans}
    print("patch_vllm_registry: verified by import: " + json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
