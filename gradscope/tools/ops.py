"""`gradscope ops`: the op table as plain rows, for people (a rich table) and tools (JSON)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field


@dataclass
class OpRow:
    name: str
    spelling: str  # how an expression writes it (the first of `spellings`)
    kind: str
    arity: str  # how many tensor arguments
    symbolic: str  # "sympy", "composed of other rows" or "closed-form adjoint"
    kinks: str | None  # what its branch marks: kink, jump, pole
    domain: list[float] | None  # where default random inputs are drawn
    gradient: str | None  # vanishing, saturation, ... (gradient-flow analysis)
    summary: str
    family: str = ""  # math, activation, reduction, shape, ...
    spellings: list[str] = field(default_factory=list)  # every accepted spelling
    signature: str = ""  # the parameters, torch's names and defaults


def _spellings(name: str, op) -> list[str]:
    from gradscope.expr.ops import ATTRIBUTES, FUNCTIONS, METHODS

    out = []
    if op.symbol and name in ATTRIBUTES.values():
        out.append(f"x{op.symbol}")
    elif op.symbol == "[]":
        out.append("x[…]")
    elif op.symbol:
        out.append(f"a {op.symbol} b" if op.arity[0] == 2 else f"{op.symbol}a")
    calls = [n for n, o in FUNCTIONS.items() if o is op]
    calls.sort(key=lambda n: (n != name, n))
    out += [f"torch.{n}(…)" if "." in n else f"{n}(…)" for n in calls]
    out += [f"x.{m}(…)" for m, o in METHODS.items() if o is op]
    return out


def _signature(op) -> str:
    from gradscope.expr.ops import REQUIRED

    parts = []
    for p in op.params:
        text = ("*" if p.star else "") + p.name
        if p.default is not REQUIRED and not (p.tensor and p.default is None):
            text += f"={p.default!r}"
        elif p.tensor and p.default is None:
            text += "=None"
        parts.append(text)
    return ", ".join(parts)


def table(pattern: str | None = None) -> list[OpRow]:
    """Every row an expression can call, or those `pattern` matches (matching); the rows only
    decompositions use (the causal mask's bias) are not listed."""
    from gradscope.expr.ops import FAMILIES, OPS

    rows = []
    for name, op in OPS.items():
        if not op.expression:
            continue
        tensors = op.tensor_params
        lo = sum(1 for p in tensors if p.kind == "tensor" and p.default is not None)
        hi = "n" if any(p.kind == "tensors" for p in tensors) else str(len(tensors))
        arity = hi if str(lo) == hi or hi == "n" else f"{lo}–{hi}"
        symbolic = ("sympy" if op.sympy is not None else "composed of other rows"
                    if op.decompose is not None else "closed-form adjoint")
        spellings = _spellings(name, op)
        rows.append(OpRow(name, ", ".join(spellings[:2]), op.kind, arity, symbolic, op.kink,
                          list(op.domain) if op.domain else None, op.flow, op.summary,
                          FAMILIES.get(name, ""), spellings, _signature(op)))
    return [r for r in rows if matching(r, pattern)] if pattern else rows


def matching(row: OpRow, pattern: str) -> bool:
    """Whether the row's name, spellings, family or summary contains `pattern` (case-folded),
    or matches it as a shell wildcard (`*pool*`, `log?`)."""
    needle = pattern.strip().casefold()
    fields = [row.name, row.family, row.summary, *row.spellings]
    texts = [f.casefold() for f in fields if f]
    if any(ch in needle for ch in "*?["):
        return any(fnmatch.fnmatchcase(t, needle) for t in texts)
    return any(needle in t for t in texts)
