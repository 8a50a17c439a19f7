"""The registry: features declare what they read — `needs` (read in the same stage: they run
first) and `reads` (a later stage) — by module; the order follows the needs, and every lookup
of another feature's facts or said value in a feature's module is one it declared."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest

from gradscope import features
from gradscope.features.base import Feature, later, module_of, ordered

PACKAGE = Path(features.__file__).parent


def _modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if p.name != "base.py"]


def _aliases(tree: ast.Module) -> dict[str, str]:
    """Local name → feature module name, from `from gradscope.features import X [as Y]`."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "gradscope.features":
            out.update({a.asname or a.name: a.name for a in node.names})
    return out


def _declared(tree: ast.Module, aliases: dict[str, str]) -> dict[str, set[str]]:
    """`needs` and `reads` of the module's Feature class, as feature module names."""
    out: dict[str, set[str]] = {"needs": set(), "reads": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id in out \
                and isinstance(node.value, ast.Tuple):
            out[node.targets[0].id] |= {_declared_name(e, aliases) for e in node.value.elts}
    return out


def _declared_name(node: ast.expr, aliases: dict[str, str]) -> str:
    """A declaration's feature module name: `module`, or `later("name")`."""
    if isinstance(node, ast.Name):
        return aliases[node.id]
    assert isinstance(node, ast.Call) and isinstance(node.args[0], ast.Constant), \
        ast.unparse(node)
    called = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
    assert called == "later", ast.unparse(node)
    return node.args[0].value


def _lookups(tree: ast.Module, aliases: dict[str, str]) -> list[tuple[str, str, int]]:
    """(which: 'facts' or 'said', feature module name, line) of each `ctx.of(M.FEATURE)` and
    `value_of(said, M.FEATURE)` naming another feature module."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "of" and node.args:
            which, arg = "facts", node.args[0]
        elif isinstance(func, ast.Name) and func.id == "value_of" and len(node.args) == 2:
            which, arg = "said", node.args[1]
        else:
            continue
        if isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name) \
                and arg.value.id in aliases:
            out.append((which, aliases[arg.value.id], node.lineno))
        else:  # own facts only otherwise: self, FEATURE
            assert isinstance(arg, ast.Name) and arg.id in ("self", "FEATURE"), \
                f"a lookup by something else than a feature module's FEATURE (line " \
                f"{node.lineno}): {ast.unparse(arg)}"
    return out


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_lookup_of_another_feature_is_declared(path):
    tree = ast.parse(path.read_text())
    aliases = _aliases(tree)
    declared = _declared(tree, aliases)
    for which, module, line in _lookups(tree, aliases):
        allowed = declared["needs"] | (declared["reads"] if which == "facts" else set())
        if path.parent.name == "features" and path.stem == module:
            continue  # (its own)
        where = "needs" if which == "said" else "needs or reads"
        assert module in allowed, \
            f"{path.name}:{line} reads {module}'s {which} without declaring it in {where}"


def test_the_registry_runs_each_feature_after_the_features_it_needs():
    order = [f.name for f in features.FEATURES]
    for feature in features.FEATURES:
        for declared in feature.needs:
            needed = module_of(declared).FEATURE
            assert order.index(needed.name) < order.index(feature.name)


def _feature(name: str, needs: tuple = (), reads: tuple = ()) -> Feature:
    cls = type(name, (Feature,), {"name": name, "needs": needs, "reads": reads})
    return cls()


def test_ordered_moves_a_feature_after_what_it_needs_and_refuses_what_cannot_be():
    first = _feature("first")
    module = types.ModuleType("first_module")
    module.FEATURE = first
    second = _feature("second", (module,))
    assert [f.name for f in ordered([second, first])] == ["first", "second"]
    assert [f.name for f in ordered([first, second])] == ["first", "second"]
    with pytest.raises(ValueError, match="not registered"):
        ordered([second])
    loop = types.ModuleType("loop")
    looped = _feature("looped", (loop,))
    loop.FEATURE = looped
    with pytest.raises(ValueError, match="need each other"):
        ordered([looped])
    with pytest.raises(ValueError, match="not registered"):  # (read later, but named wrong)
        ordered([_feature("reader", reads=(later("no_such_feature"),))])
