"""The Functions torch generates for `torch.library` custom ops (one class per op overload,
its backward calling the one `register_autograd` registered): which op it is, its arguments'
names, and where the registered backward is written — what a culprit names instead of torch's
generated class."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any

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
    except AttributeError:
        arguments = ()
    where = def_location(fn) if inspect.isfunction(fn) else ""
    name = getattr(op._schema, "name", "") or str(op)
    function = getattr(fn, "__qualname__", "").replace(".<locals>", "") \
        if inspect.isfunction(fn) else ""
    return Registered(name, arguments, where, function=function)
