"""One finding vocabulary: every id the code can raise is a catalogue entry, and findings are made
through one factory (``catalogue.finding``).

The ids are read from the code itself (an ``ast`` walk over sparktui/**/*.py: every call that names a
finding id with a string literal) and from the data files that name ids (doctor causes, verdict
rules, end phases, exception shapes, milestones), so a new id written anywhere without its
catalogue entry fails here, not as a KeyError in front of a user.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from pathlib import Path

import pytest

from sparktui.diagnosis.catalogue import default_catalogue

# one worker parses the package once (the parse is the cost: ~1-2 s) for every test here
pytestmark = pytest.mark.xdist_group("finding_vocabulary")

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "sparktui"

# callee name -> (position, keyword) of its finding-id argument.  Names, not objects: the walk reads
# source.  `fail` / `warn` are the doctor checks' constructors (their 6th argument is the finding id
# a failed check stands for); `make` is a verdict rule's (its 3rd argument lists the ids it carries);
# `raise_derived` is a log scanner's (it looks its id up itself).  A function that hands one of its
# own parameters on as the id of any of these (catalogued_finding, image_finding) is found by the
# walk and added (``id_functions``).
ID_ARG = {
    "finding": (0, "fid"),  # the factory: catalogue.finding / Catalogue.finding
    "Finding": (0, "id"),  # the model's dataclass: only the factory may call it (see below)
    "raise_derived": (0, "fid"),
    "fail": (5, "finding"),
    "warn": (5, "finding"),
    "make": (2, "ids"),
}
# (file, key path) of the ids named in data: "*" walks every item of a list or table
DATA_IDS = [
    ("fabric/causes.toml", ("failure", "*", "finding")),
    ("fabric/causes.toml", ("cause", "*", "finding")),
    ("diagnosis/verdict_rules.toml", ("latent", "*", "id")),
    ("diagnosis/end_phases.toml", ("phase", "*", "finding")),
    ("diagnosis/end_phases.toml", ("last_line", "*", "id")),
    ("diagnosis/end_phases.toml", ("together", "*", "finding")),
    ("diagnosis/end_phases.toml", ("together", "*", "id")),
    ("diagnosis/exc_shapes.toml", ("shape", "*", "id")),
    ("diagnosis/exc_shapes.toml", ("during", "*", "id")),
    ("diagnosis/milestones.toml", ("phase", "*", "hang_finding")),
    ("diagnosis/stall_phases.toml", ("terminal", "finding_ids")),
]
FACTORY_FILE = "sparktui/diagnosis/catalogue.py"  # the one place a model.Finding is constructed


def _strings(node: ast.AST, names: dict[str, list[ast.AST]], seen: frozenset[str] = frozenset()) -> list[str]:
    """The string ids an argument expression can take: a literal, either branch of a conditional, an
    `or` default, the items of a list or a sum of lists, and what a name is given in its scope."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Name) and node.id in names and node.id not in seen:
        return [s for v in names[node.id] for s in _strings(v, names, seen | {node.id})]
    if isinstance(node, ast.IfExp):
        return _strings(node.body, names, seen) + _strings(node.orelse, names, seen)
    if isinstance(node, ast.BoolOp):
        return [s for v in node.values for s in _strings(v, names, seen)]
    if isinstance(node, ast.BinOp):
        return _strings(node.left, names, seen) + _strings(node.right, names, seen)
    if isinstance(node, (ast.List, ast.Tuple)):
        return [s for v in node.elts for s in _strings(v, names, seen)]
    return []


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _assigned(scope: ast.AST) -> dict[str, list[ast.AST]]:
    """name -> the expressions given to it in ``scope``: `x = ...` and `x.append(...)` / `x.insert(i, ...)`
    (a rule builds its list of ids so)."""
    names: dict[str, list[ast.AST]] = {}
    for n in ast.walk(scope):
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Name):
                    names.setdefault(t.id, []).append(n.value)
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
              and n.func.attr in ("append", "insert") and n.args):
            names.setdefault(n.func.value.id, []).append(n.args[-1])
    return names


def _id_args(node: ast.AST, id_arg: dict[str, tuple[int, str]]) -> list[ast.AST]:
    """The argument expressions of ``node`` that name a finding id."""
    if isinstance(node, ast.Call) and _callee(node) in id_arg:
        name = _callee(node)
        if name in ("fail", "warn") and not isinstance(node.func, ast.Name):
            return []  # warnings.warn, logging's warn: not a doctor check
        if name == "make" and isinstance(node.func, ast.Name):
            return []  # `make = fail if ... else warn`: the doctor's alias, its ids are data (causes.toml)
        pos, kw = id_arg[name]
        return [k.value for k in node.keywords if k.arg == kw] + ([node.args[pos]] if len(node.args) > pos else [])
    if isinstance(node, ast.Dict):  # an investigate item: {"id": ..., "severity": ..., ...}
        keys = {k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)}
        if "id" in keys and "severity" in keys:
            return [keys["id"]]
    return []


def _scan(tree: ast.AST, names: dict[str, list[ast.AST]], where: str, found: dict[str, list[str]],
          id_arg: dict[str, tuple[int, str]]) -> None:
    """Every id named under ``tree``; a function's own names shadow the enclosing ones."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            _scan(node, {**names, **_assigned(node)}, where, found, id_arg)
            continue
        for a in _id_args(node, id_arg):
            for fid in filter(None, _strings(a, names)):  # "": a guard's default, never raised
                found.setdefault(fid, []).append(f"{where}:{node.lineno}")
        _scan(node, names, where, found, id_arg)


_PARSED: dict[Path, ast.Module] = {}


def _trees(words: set[str]) -> list[tuple[Path, ast.Module]]:
    """The parsed files that hold any of ``words`` (a file without a name of an id-taking function
    cannot name an id: parsing only the others halves the cost of the walk)."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        if path not in _PARSED:
            text = path.read_text(encoding="utf-8")
            if not any(w in text for w in words):
                continue
            _PARSED[path] = ast.parse(text, str(path))
        out.append((path, _PARSED[path]))
    return out


def _wrappers(trees: list[tuple[Path, ast.Module]], id_arg: dict[str, tuple[int, str]]) -> dict[str, tuple[int, str]]:
    """``id_arg`` plus every function that passes one of its parameters on as the id of one of them."""
    id_arg = dict(id_arg)
    fns: dict[int, tuple[str, list[str], list[ast.Call]]] = {}  # a function: its name, parameters, calls

    def visit(node: ast.AST, fn: int | None) -> None:  # one pass; a call belongs to its innermost function
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                params = [a.arg for a in child.args.posonlyargs + child.args.args]
                fns[id(child)] = (child.name, params[1:] if params[:1] in (["self"], ["cls"]) else params, [])
                visit(child, id(child))
                continue
            if fn is not None and isinstance(child, ast.Call):
                fns[fn][2].append(child)
            visit(child, fn)

    for _, tree in trees:
        visit(tree, None)
    grown = True
    while grown:
        grown = False
        for name, params, calls in fns.values():
            got = [] if name in id_arg or not params else [
                a.id for c in calls for a in _id_args(c, id_arg) if isinstance(a, ast.Name) and a.id in params]
            if got:
                id_arg[name] = (params.index(got[0]), got[0])
                grown = True
    return id_arg


@functools.lru_cache(maxsize=1)
def id_functions() -> tuple[dict[str, tuple[int, str]], tuple[tuple[Path, ast.Module], ...]]:
    """ID_ARG plus every wrapper that passes one of its parameters on as a finding id
    (``catalogued_finding(fid, title, ...)``), and the files that may call any of them."""
    id_arg = dict(ID_ARG)
    while True:  # a wrapper's callers are files that name the wrapper: read them too, until none is new
        trees = _trees({*id_arg, '"id"'})
        grown = _wrappers(trees, id_arg)
        if grown.keys() == id_arg.keys():
            return id_arg, tuple(trees)
        id_arg = grown


@functools.lru_cache(maxsize=1)
def code_ids() -> dict[str, list[str]]:
    """Finding id -> where the code names it ("path:line"), for every .py file of the package."""
    found: dict[str, list[str]] = {}
    id_arg, trees = id_functions()
    for path, tree in trees:
        module = _assigned(ast.Module(body=[n for n in tree.body if isinstance(n, ast.Assign)], type_ignores=[]))
        _scan(tree, module, str(path.relative_to(ROOT)), found, id_arg)
    return found


def _walk(data, keys: tuple[str, ...]):
    if not keys:
        yield from (data if isinstance(data, list) else [data])
        return
    k, rest = keys[0], keys[1:]
    if k == "*":
        items = data if isinstance(data, list) else list(data.values()) if isinstance(data, dict) else []
        for item in items:
            yield from _walk(item, rest)
    elif isinstance(data, dict) and k in data:
        yield from _walk(data[k], rest)


def data_ids() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for rel, keys in DATA_IDS:
        data = tomllib.loads((PKG / rel).read_text(encoding="utf-8"))
        for fid in _walk(data, keys):
            found.setdefault(fid, []).append(f"sparktui/{rel}: {'.'.join(keys)}")
    return found


def test_the_walk_finds_ids_of_every_kind():
    # a walk that silently found nothing would pass the test below: it must see each way of naming one
    assert {"catalogued_finding", "image_finding"} <= set(id_functions()[0])
    ids = code_ids()
    for fid in ("half_cluster", "stale_container", "image_not_found", "engine_dead", "rendezvous_timeout",
                "suspected_hang", "ssh_unreachable", "nccl_network_error", "port_in_use"):
        assert fid in ids, fid
    data = data_ids()
    for fid in ("nccl_ib_gid", "nccl_gdr_off", "nccl_init_hang", "sglang_host_ip_missing", "duplicate_gpu_rank"):
        assert fid in data, fid
    for rel, keys in DATA_IDS:  # a renamed key would drop its ids without a word
        assert any(f"sparktui/{rel}: {'.'.join(keys)}" in w for ws in data.values() for w in ws), (rel, keys)


def test_every_raised_id_is_a_catalogue_entry():
    cat = default_catalogue()
    named = {**data_ids()}
    for fid, where in code_ids().items():
        named.setdefault(fid, []).extend(where)
    missing = {fid: where for fid, where in sorted(named.items()) if fid not in cat}
    assert missing == {}, "ids raised but not in catalogue.toml: " + "; ".join(
        f"{fid} ({', '.join(w[:2])})" for fid, w in missing.items())


def test_findings_are_made_only_by_the_factory():
    # a model.Finding(...) written anywhere else would bypass the catalogue (and its check above
    # when its id is a variable): the dataclass is constructed in catalogue.py only
    direct = []
    for path, tree in _trees({"Finding"}):
        rel = str(path.relative_to(ROOT))
        if rel == FACTORY_FILE:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _callee(node) == "Finding":
                direct.append(f"{rel}:{node.lineno}")
    assert direct == []


def test_state_raised_ids_say_so():
    # an id only code raises (no line pattern, no log analysis) is documented as raised by state
    cat = default_catalogue()
    for fid in ("half_cluster", "stale_container", "image_not_found", "ssh_unreachable", "server_not_answering",
                "image_build_failed"):
        assert cat[fid].raised_by == "state", fid


def test_the_factory_refuses_an_unknown_id_and_keeps_a_call_site_title():
    from sparktui.diagnosis.catalogue import finding

    with pytest.raises(KeyError, match="no finding 'no_such_id'"):
        finding("no_such_id", title="x")
    e = default_catalogue()["port_in_use"]
    f = finding("port_in_use", title="port 8000 on spark1 is already taken", node="spark1", source="spark1/launch")
    assert (f.id, f.severity, f.title, f.explanation, f.advice) == (
        "port_in_use", e.severity, "port 8000 on spark1 is already taken", e.explanation, e.advice)
