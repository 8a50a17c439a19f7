"""The op table as rows: every function and operator, once."""

from gradscope.expr.ops import FUNCTIONS, OPS
from gradscope.tools.ops import table


def test_one_row_per_op_with_its_spelling():
    rows = {r.name: r for r in table()}
    assert set(rows) == {name for name, op in OPS.items() if op.expression}
    for name, op in FUNCTIONS.items():  # every callable name is among its row's spellings
        spelled = f"torch.{name}(…)" if "." in name else f"{name}(…)"
        assert spelled in rows[op.name].spellings, name
    assert rows["round"].gradient == "vanishing" and rows["clamp"].gradient == "saturation"
    assert rows["sum"].arity == "1" and rows["where"].arity == "3"
    assert rows["cat"].arity == "n" and rows["layer_norm"].arity == "1–3"
    assert "x.softmax(…)" in rows["softmax"].spellings and rows["T"].spellings == ["x.T"]
    assert rows["gelu"].signature == "input, approximate='none'"
    assert rows["add"].spellings[:2] == ["a + b", "add(…)"]
    assert {r.family for r in rows.values()} == {
        "math", "activation", "reduction", "shape", "indexing", "linear algebra",
        "normalisation and loss", "convolution and pooling"}


def test_a_pattern_picks_rows_by_name_spelling_family_or_summary():
    names = {r.name for r in table("softmax")}
    assert {"softmax", "log_softmax", "softmin"} <= names and "relu" not in names
    assert {r.name for r in table("RELU")} >= {"relu", "relu6", "leaky_relu"}  # case-folded
    assert {r.name for r in table("log?")} == {"log2"}  # a shell wildcard: whole field
    assert {r.family for r in table("pooling")} == {"convolution and pooling"}
    assert table("no such op anywhere") == []


def test_every_row_has_exactly_the_family_its_module_declares():
    import pkgutil
    from collections import Counter
    from importlib import import_module

    from gradscope.expr.ops import FAMILIES

    declared: Counter[str] = Counter()
    for info in pkgutil.iter_modules(import_module("gradscope.expr.ops").__path__):
        module = import_module(f"gradscope.expr.ops.{info.name}")
        rows = getattr(module, "ROWS", None)
        if rows is None or info.name == "flow_only":  # (not callable in expressions)
            continue
        by_family = module.BY_FAMILY  # every family module says where its rows belong
        assert sorted(op.name for rs in by_family.values() for op in rs) == sorted(
            op.name for op in rows), info.name
        declared.update(op.name for rs in by_family.values() for op in rs)
    assert set(declared) == set(OPS) == set(FAMILIES)
    assert [name for name, count in declared.items() if count != 1] == []
    assert FAMILIES["linalg.solve"] == "linear algebra" and FAMILIES["masked.sum"] == "reduction"
