"""The layout rules of docs/architecture.md, enforced: imports go one way and never in a cycle,
engines stay independent, renderers read reports only, only the op table names an op, and no
file or function grows past what a newcomer can read in one go."""

from __future__ import annotations

import ast
import re
import warnings
from collections import defaultdict
from pathlib import Path

import pytest

from gradscope.expr.ops import KNOWN
from tests.paths import ROOT

PACKAGE = ROOT / "gradscope"

# Lower layers never import higher ones; within a layer, a package imports only itself.
LAYERS = [
    ("gradscope._version", "gradscope.errors", "gradscope.markers", "gradscope.escape"),
    ("gradscope.process", "gradscope.memory"),
    ("gradscope.tensors", "gradscope.option_text", "gradscope.report.status",
     "gradscope.report.kinds", "gradscope.compare.tolerance", "gradscope.rng",
     "gradscope.engines.fd.policy", "gradscope.usercode"),
    ("gradscope.report.model",),
    ("gradscope.report.modules", "gradscope.report.read"),
    ("gradscope.report.headline", "gradscope.report.build"),
    ("gradscope.options", "gradscope.render", "gradscope.expr"),
    ("gradscope.inputs", "gradscope.engines"),
    ("gradscope.targets", "gradscope.compare"),
    ("gradscope.evidence",),
    ("gradscope.explain",),
    ("gradscope.features",),
    ("gradscope.runner",),
    ("gradscope.tools",),
    ("gradscope.api",),
    ("gradscope.suite",),
    ("gradscope.testing",),
    ("gradscope.cli",),
    ("gradscope._launch", "gradscope._rank"),
    ("gradscope.__main__", "gradscope"),
]
# The deliberate exceptions: the contract's `report.to_json()/to_markdown()/to_text()` reach
# the renderers lazily (inside the methods), never at import time; `Report.from_dict` its
# reader so.
ALLOWED = {("gradscope.report.model", "gradscope.render"),
           ("gradscope.report.model", "gradscope.report.read"),
           ("gradscope.report.model", "gradscope.render.json"),
           ("gradscope.report.model", "gradscope.render.markdown")}
# Each engine is its own world: these groups never import one another.
ENGINES = {"gradscope.engines.autograd": "autograd", "gradscope.engines.symbolic": "symbolic",
           "gradscope.engines.sympy_eval": "symbolic", "gradscope.engines.fd": "fd"}
RENDER_MAY_IMPORT = ("gradscope.render", "gradscope.report", "gradscope.errors",
                     "gradscope.escape", "gradscope._version")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path, top_level_only: bool = False) -> set[str]:
    """The gradscope modules `name` imports (all of them, or only at import time)."""
    tree = ast.parse(path.read_text())
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    found: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if candidate in MODULES else base)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return {m for m in found if m == "gradscope" or m.startswith("gradscope.")} - {name}


def _rank(module: str) -> tuple[int, str]:
    best = None
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                    best is None or len(prefix) > len(best[1])):
                best = (rank, prefix)
    assert best is not None, f"{module} has no layer in LAYERS"
    return best


def test_every_module_has_a_layer():
    for name in MODULES:
        _rank(name)


def test_imports_go_one_way():
    wrong = []
    for name, path in MODULES.items():
        rank, home = _rank(name)
        for target in _imports(name, path):
            if (name, target) in ALLOWED:
                continue
            their_rank, their_home = _rank(target)
            if their_rank > rank or (their_rank == rank and their_home != home):
                wrong.append(f"{name} imports {target}")
    assert not wrong, "imports against the layering:\n" + "\n".join(sorted(wrong))


def test_no_import_cycle():
    graph = {n: _imports(n, p, top_level_only=True) & set(MODULES) for n, p in MODULES.items()}
    state: dict[str, int] = defaultdict(int)  # 0 new, 1 on the stack, 2 done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for nxt in graph[node]:
            if state[nxt] == 1:
                pytest.fail("import cycle: " + " -> ".join([*stack, node, nxt]))
            if state[nxt] == 0:
                visit(nxt, [*stack, node])
        state[node] = 2

    for node in graph:
        if state[node] == 0:
            visit(node, [])


def _engine(module: str) -> str | None:
    return next((e for prefix, e in ENGINES.items()
                 if module == prefix or module.startswith(prefix + ".")), None)


def test_engines_never_import_each_other_or_the_comparison():
    for name, path in MODULES.items():
        mine = _engine(name)
        if mine is None:
            continue
        for target in _imports(name, path):
            theirs = _engine(target)
            assert theirs in (None, mine), f"{name} imports another engine: {target}"
            assert not target.startswith("gradscope.compare"), f"{name} imports {target}"


def test_renderers_read_reports_only():
    for name, path in MODULES.items():
        if name.startswith("gradscope.render"):
            for target in _imports(name, path):
                assert target.startswith(RENDER_MAY_IMPORT), f"{name} imports {target}"


def _named_ops(path: Path) -> list[str]:
    """Comparisons of an op's name with a literal op name (`op == "round"`, `op in (...)`)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        literals = set()
        for side in sides:
            if isinstance(side, ast.Constant) and isinstance(side.value, str):
                literals.add(side.value)
            elif isinstance(side, ast.Tuple | ast.List | ast.Set):
                literals.update(e.value for e in side.elts if isinstance(e, ast.Constant))
        about_ops = any((isinstance(s, ast.Attribute) and s.attr in ("op", "name"))
                        or (isinstance(s, ast.Name) and s.id in ("op", "name")) for s in sides)
        named = literals & set(KNOWN)
        if about_ops and named:
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} names {sorted(named)}")
    return found


def test_only_the_op_table_names_an_op():
    found = [hit for name, path in MODULES.items() if not name.startswith("gradscope.expr.ops")
             for hit in _named_ops(path)]
    assert not found, "\n".join(found)


# The stages ask the target what to call and never which run mode runs (docs/architecture.md,
# "run modes are target wrappers"): no mode is named in them, not even in a comment.
MODE_WORDS = re.compile(r"compil\w*|autocast\w*|nproc|distributed|\branks?\b|dynamo|torchrun|"
                        r"\bgloo\b|--plain", re.IGNORECASE)


def test_the_stages_name_no_run_mode():
    found = [f"{path.relative_to(ROOT)}:{k}: {line.strip()[:80]}"
             for name, path in MODULES.items()
             if name.startswith(("gradscope.evidence", "gradscope.runner"))
             for k, line in enumerate(path.read_text().splitlines(), 1)
             if MODE_WORDS.search(line)]
    assert not found, "\n".join(found)


def test_functions_stay_readable():
    long = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {size}")
    assert not long, "\n".join(long)


def test_a_long_file_says_why():
    """Packages are cut by concept, not by a line count: a file past MAX_FILE_LINES is a
    warning, and it says why it is one piece in a comment (`# Long: …`)."""
    long = {path: n for path in MODULES.values()
            if (n := len(path.read_text().splitlines())) > MAX_FILE_LINES}
    if long:
        warnings.warn("long files: " + ", ".join(f"{p.relative_to(ROOT)} ({n} lines)"
                                                 for p, n in long.items()), stacklevel=1)
    silent = [str(p.relative_to(ROOT)) for p in long
              if not re.search(r"^\s*# Long: \S", p.read_text(), re.MULTILINE)]
    assert not silent, "long files that do not say why (# Long: …): " + ", ".join(silent)


# The values the stages of a run pass on (and the report they build) are frozen: no stage can
# change what another made.
FROZEN = ("gradscope.runner", "gradscope.report.model", "gradscope.engines.base",
          "gradscope.engines.fd.result", "gradscope.compare.elements", "gradscope.inputs.bind",
          "gradscope.targets.base", "gradscope.render")


def _dataclasses(path: Path) -> list[tuple[str, bool]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ClassDef):
            continue
        for deco in node.decorator_list:
            call = deco if isinstance(deco, ast.Call) else None
            name = (call.func if call else deco)
            if isinstance(name, ast.Name) and name.id == "dataclass":
                frozen = call is not None and any(
                    k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value
                    for k in call.keywords)
                found.append((node.name, frozen))
    return found


def test_stage_values_are_frozen():
    thawed = [f"{name}: {cls}" for name, path in MODULES.items()
              if name.startswith(FROZEN) for cls, frozen in _dataclasses(path) if not frozen]
    assert not thawed, "mutable dataclasses among the stage values:\n" + "\n".join(thawed)


TARGET_CLASSES = {"Target", "ExpressionTarget", "CodeTarget", "FunctionTarget", "ModuleTarget",
                  "CallableTarget", "SecondOrderTarget"}


def test_nothing_outside_targets_asks_which_class_a_target_is():
    found = []
    for name, path in MODULES.items():
        if name.startswith("gradscope.targets"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2:
                names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
                names |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
                if names & TARGET_CLASSES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) \
                    and node.left.attr == "kind" and isinstance(node.left.value, ast.Name) \
                    and node.left.value.id == "target":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} (target.kind)")
    assert not found, "\n".join(found)


OUR_ERRORS = {"GradscopeError", "UsageError", "TargetError", "UnknownName", "EvaluationError"}


def test_gradscope_never_parses_its_own_messages():
    """An `except` of one of our errors reads its fields, never its text (`str(exc)` in a
    regular expression, a comparison or a substring test)."""
    found = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ExceptHandler) or node.name is None:
                continue
            caught = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)} \
                if node.type is not None else set()
            if not caught & OUR_ERRORS:
                continue
            for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
                text = isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) \
                    and inner.func.id == "str" and len(inner.args) == 1 \
                    and isinstance(inner.args[0], ast.Name) and inner.args[0].id == node.name
                if text and _read(inner, node):
                    found.append(f"{path.relative_to(ROOT)}:{inner.lineno}")
    assert not found, "messages of our own errors parsed at:\n" + "\n".join(found)


def _read(call: ast.Call, handler: ast.ExceptHandler) -> bool:
    """Whether `str(exc)` is matched, compared or searched (rather than passed on whole)."""
    for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
        if isinstance(node, ast.Compare) and any(c is call for c in ast.walk(node)):
            return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" \
                and any(a is call for a in node.args):
            return True
    return False


def test_class_names_are_unique():
    seen: dict[str, str] = {}
    twice = []
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                if node.name in seen:
                    twice.append(f"{node.name}: {seen[node.name]} and {name}")
                seen[node.name] = name
    assert not twice, "\n".join(twice)


def test_every_module_path_the_code_names_exists():
    """A docstring or comment that sends a reader to `package/module.py` sends them somewhere
    (modules move: targets/modes.py, tools/results.py and verdict/judge.py were gone)."""
    examples = {"path/to/file.py"}  # (the CLI's help: a user's file)
    stale = []
    for path in MODULES.values():
        for named in re.findall(r"\b((?:[a-z_]+/)+[a-z_]+\.py)\b", path.read_text()):
            if named not in examples and not any(
                    p.exists() for p in (ROOT / "gradscope" / named, ROOT / named,
                                         path.parent / named)):
                stale.append(f"{path.relative_to(ROOT)} names {named}")
    assert not stale, "\n".join(stale)
