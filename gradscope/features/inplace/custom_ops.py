"""The Functions torch generates for `torch.library` custom ops (one class per op overload,
its backward calling the one `register_autograd` registered): which op it is, its arguments'
names, and where the registered backward is written — what a culprit names instead of torch's
generated class."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gradscope.report.model import Diagnostic
from gradscope.targets.custom_op import CUSTOM_OPS
from gradscope.usercode import def_location


@dataclass(frozen=True)
class Registered:
    op: str  # `mylib::op`
    arguments: tuple[str, ...]  # the op's schema's argument names
    where: str  # `file.py:LINE` of the registered backward, or ''
    # a dispatcher op whose autograd kernel is not Python (a C++ extension's): nothing of
    # it can be read but its name and schema
    dispatcher: bool = False
    function: str = ""  # the registered backward's own (qualified) name, where it has one
    writes: tuple[str, ...] = ()  # the arguments its schema declares it mutates

    @property
    def label(self) -> str:
        if self.dispatcher:
            return f"the autograd kernel of dispatcher op {self.op}"
        named = f" {self.function}" if self.function and "<lambda>" not in self.function \
            else ""
        return f"the backward{named} registered for custom op {self.op}"


def registered(cls: type) -> Registered | None:
    """What the generated Function `cls` stands for (None: not one). Read from its backward's
    closure — the op overload and the registration it calls — and the op's schema."""
    op = getattr(cls, "dispatcher_op", None)  # (calls.stand_in's)
    if op is not None:
        return Registered(op._schema.name, tuple(a.name for a in op._schema.arguments), "",
                          dispatcher=True)
    if getattr(cls, "__module__", "") != CUSTOM_OPS:
        return None
    cells = []
    for cell in getattr(getattr(cls, "backward", None), "__closure__", None) or ():
        try:
            cells.append(cell.cell_contents)
        except ValueError:  # (an empty cell)
            continue
    # (the op overload: its schema is torch's FunctionSchema, whose arguments have names)
    op = next((c for c in cells if hasattr(getattr(c, "_schema", None), "arguments")), None)
    if op is None:
        return None
    fn: Any = next((c._backward_fn for c in cells
                    if callable(getattr(c, "_backward_fn", None))), None)
    try:
        arguments = tuple(a.name for a in op._schema.arguments)
        writes = tuple(a.name for a in op._schema.arguments
                       if a.alias_info is not None and a.alias_info.is_write)
    except AttributeError:
        arguments, writes = (), ()
    where = def_location(fn) if inspect.isfunction(fn) else ""
    name = getattr(op._schema, "name", "") or str(op)
    function = getattr(fn, "__qualname__", "").replace(".<locals>", "") \
        if inspect.isfunction(fn) else ""
    return Registered(name, arguments, where, function=function, writes=writes)


def undeclared(op: Registered, written: Iterable[str]) -> tuple[str, ...]:
    """The arguments the op's forward wrote into that its schema does not declare mutated."""
    seen = set(written)
    return tuple(n for n in op.arguments if n in seen and n not in op.writes)


def mutation(op: Registered, written: tuple[str, ...]) -> Diagnostic:
    """An op whose forward writes into arguments its schema declares unchanged: autograd,
    torch.compile and functionalization read them as they were (opcheck's test_schema)."""
    names = ", ".join(written)
    # (where: the op, by name — op.where is its registered backward's line, not its forward's)
    return Diagnostic(
        kind="undeclared_mutation", op=op.op, where=op.op, inputs=[], count=len(written),
        message=(f"custom op {op.op} writes into its argument(s) {names} while its "
                 "schema declares no mutation of them: autograd, torch.compile and "
                 "functionalization take them as unchanged, so a caller that reads them "
                 "after the call, or a compiled graph, gets other values"),
        hint=(f"declare it (mutates_args=({', '.join(repr(n) for n in written)},)) or write "
              "into a copy; torch.library.opcheck's test_schema finds this"),
        summary=f"custom op {op.op} writes into {names}, its schema declaring no mutation")
