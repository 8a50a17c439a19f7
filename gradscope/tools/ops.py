"""`gradscope ops`: the op table as plain rows, for people (a rich table) and tools (JSON)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class OpRow:
    name: str
    spelling: str  # how an expression writes it
    kind: str
    arity: str
    symbolic: str  # "sympy" or "closed-form adjoint"
    kinks: str | None  # what its branch marks: kink, jump, pole
    domain: list[float] | None  # where default random inputs are drawn
    gradient: str | None  # vanishing, saturation, ... (gradient-flow analysis)
    summary: str


def table() -> list[OpRow]:
    from gradscope.expr.ops import FUNCTIONS, OPS

    rows = []
    for name, op in OPS.items():
        lo, hi = op.arity
        spelling = f"{name}(…)" if name in FUNCTIONS else f"a {op.symbol} b" \
            if lo == 2 else f"{op.symbol}a"
        if name in FUNCTIONS and op.symbol:
            spelling += f", a {op.symbol} b"
        rows.append(OpRow(name, spelling, op.kind, str(lo) if lo == hi else f"{lo}–{hi}",
                          "closed-form adjoint" if op.vjp is not None else "sympy", op.kink,
                          list(op.domain) if op.domain else None, op.flow, op.summary))
    return rows
