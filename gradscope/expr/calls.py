"""How an expression calls an op: torch's spellings resolved, arguments bound to the row's
signature, static arguments read from constants. Nothing here evaluates text.

`F.gelu(x)`, `torch.nn.functional.gelu(x)`, `gelu(x)` and `x.gelu()` name the same row; the
call's positional and keyword arguments are bound the way Python binds them to torch's
parameter names (`dim=`, `keepdim=`, `reduction=`); tensor arguments become expression nodes,
the others (ints, floats, strings, tuples of ints) are read from literals and checked against
the parameter's kind.
"""

from __future__ import annotations

import ast
import difflib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gradscope.errors import UsageError
from gradscope.expr import ir
from gradscope.expr.ops import (
    FUNCTIONS,
    METHODS,
    MODULE_ROOTS,
    MODULES,
    OPTIONAL,
    RANDOM,
    REQUIRED,
    TENSORS,
    Op,
    OpParam,
)

MAX_STATIC_INT = 1 << 31
MAX_DIM = 64
MAX_SEQUENCE = 64  # elements of a tuple argument or a list of tensors
# torch functions whose results are complex: refused with that reason
COMPLEX = frozenset({"complex", "polar", "view_as_complex", "stft", "istft", "cfloat",
                     "cdouble", "chalf"})
KEYWORD_ALIASES = {"axis": "dim", "axes": "dims"}  # numpy spellings torch accepts too


@dataclass
class BoundCall:
    args: tuple[ir.Node, ...]
    names: tuple[str, ...]
    params: tuple[tuple[str, Any], ...]


def dotted(node: ast.AST) -> str | None:
    """`torch.nn.functional.gelu` → "torch.nn.functional.gelu"; None if not names and dots."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def is_module(node: ast.AST) -> bool:
    """`torch`, `F`, `torch.nn.functional` ...: a module path, not a tensor."""
    path = dotted(node)
    return path is not None and path.split(".")[0] in MODULE_ROOTS


def function_name(path: str) -> str:
    """The function name a dotted path asks for, module prefixes removed (the path itself when
    no prefix leaves a known name: it is unknown either way)."""
    for prefix in MODULES:  # longest first
        if path.startswith(prefix) and path[len(prefix):] in FUNCTIONS:
            return path[len(prefix):]
    return path


def unknown(snippet: str, name: str, method: bool) -> UsageError:
    what = f"tensor method `.{name}()`" if method else f"function `{name}`"
    bare = name.rpartition(".")[2]
    if bare in RANDOM:
        return UsageError(
            f"refused `{snippet}`: {what} is random (two calls at nearby points draw "
            "differently, so finite differences would measure the noise); check the code as a "
            "Python target with the randomness fixed: a module with --eval, or the mask passed "
            "as data with --const")
    if bare in COMPLEX or name.startswith(("fft.", "torch.fft.")):
        return UsageError(
            f"refused `{snippet}`: {what} works with complex numbers, and expressions are "
            "real; check the code as a Python target (`file.py:NAME`) that returns a real "
            "tensor, e.g. torch.fft.rfft(x).abs()")
    known = sorted(METHODS if method else FUNCTIONS)
    # (a close spelling only: `linear` is not a misspelt `inner`)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.75)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return UsageError(f"refused `{snippet}`: unknown {what}{hint} (`gradscope ops` lists "
                      "every function and its spellings); the same code runs as a Python "
                      "target: put it in a function in a .py file and check `file.py:NAME`")


class Binder:
    """Binds one call's arguments to its row's signature. `node` turns an argument into an
    expression node (the parser's builder); `refuse` makes the error that names the call."""

    def __init__(self, op: Op, name: str, snippet: str, node: Callable[..., ir.Node],
                 refuse: Callable[[str], UsageError]) -> None:
        self.op, self.name, self.snippet = op, name, snippet
        self.to_node, self.refuse = node, refuse

    def bind(self, positional: list[ast.AST], keywords: list[ast.keyword]) -> BoundCall:
        given = self._match(positional, keywords)
        if self.op.one_of and all(
                given.get(n) is None or (isinstance(given[n], ast.Constant)
                                         and given[n].value is None) for n in self.op.one_of):
            named = " or ".join(f"'{n}'" for n in self.op.one_of)
            raise self.refuse(f"torch.{self.name}: at least one of {named} must not be None "
                              f"(as torch says; {self.usage()})")
        unbiased = given.get("dim")
        if isinstance(unbiased, ast.Constant) and isinstance(unbiased.value, bool) and \
                "unbiased" in {p.name for p in self.op.params} and "unbiased" not in given:
            given["unbiased"] = given.pop("dim")  # torch's overload var(input, unbiased)
        args: list[ir.Node] = []
        names: list[str] = []
        params: list[tuple[str, Any]] = []
        tensors = self.op.tensor_params
        for p in self.op.params:
            raw = given.get(p.name, REQUIRED)
            if raw is REQUIRED and p.default is REQUIRED:
                raise self.refuse(f"{self.name}() needs `{p.name}` ({self.usage()})")
            if p.kind == TENSORS:
                nodes = self._tensors(p, raw)
                args += nodes
                continue
            if p.tensor:
                if p.kind == OPTIONAL and isinstance(raw, ast.Constant) and raw.value is None:
                    raw = REQUIRED  # batch_norm(x, None, None, ...): the tensor left out
                if raw is REQUIRED:
                    if p.kind == OPTIONAL:
                        continue
                    args.append(ir.Num((0, 0), float(p.default), float(p.default).is_integer()))
                else:
                    condition = tensors.index(p) == self.op.condition_arg
                    args.append(self.to_node(raw, condition))
                names.append(p.name)
                continue
            value = p.default if raw is REQUIRED else self._static(p, raw)
            params.append((p.name, value))
        has_optional = any(p.kind == OPTIONAL for p in tensors)
        return BoundCall(tuple(args), tuple(names) if has_optional else (), tuple(params))

    def usage(self) -> str:
        parts = []
        for p in self.op.params:
            text = ("*" if p.star else "") + p.name
            if p.default is not REQUIRED:
                text += f"={p.default!r}"
            parts.append(text)
        return f"{self.name}({', '.join(parts)})"

    def _match(self, positional: list[ast.AST], keywords: list[ast.keyword]) -> dict[str, Any]:
        params = self.op.params
        given: dict[str, Any] = {}
        rest = list(positional)
        for p in params:
            if not rest:
                break
            if p.star:  # one list or tuple (cat([x, y], 0)), or the rest (reshape(x, 3, 2))
                seq = rest[0]
                if isinstance(seq, ast.List | ast.Tuple):
                    given[p.name] = list(seq.elts)
                    rest.pop(0)
                    continue
                given[p.name], rest = rest, []
                break
            given[p.name] = rest.pop(0)
        if rest:
            raise self.refuse(f"{self.name}() takes at most {len(positional) - len(rest)} "
                              f"positional arguments, got {len(positional)} ({self.usage()})")
        by_name = {p.name: p for p in params}
        for kw in keywords:
            if kw.arg is None:
                raise self.refuse("**kwargs are not allowed")
            key = KEYWORD_ALIASES.get(kw.arg, kw.arg) if kw.arg not in by_name else kw.arg
            if key not in by_name:
                close = difflib.get_close_matches(kw.arg, list(by_name), n=2, cutoff=0.5)
                hint = f" (did you mean {' or '.join(close)}?)" if close else ""
                raise self.refuse(f"{self.name}() has no keyword argument `{kw.arg}`{hint}; "
                                  f"it takes {self.usage()}")
            if key in given:
                raise self.refuse(f"{self.name}() got `{kw.arg}` twice")
            value = kw.value
            if by_name[key].star:
                value = list(value.elts) if isinstance(value, ast.List | ast.Tuple) else [value]
            given[key] = value
        return given

    def _tensors(self, p: OpParam, raw: Any) -> list[ir.Node]:
        if raw is REQUIRED:
            raise self.refuse(f"{self.name}() needs at least one tensor in `{p.name}`")
        if not isinstance(raw, list):
            if not isinstance(raw, ast.List | ast.Tuple):
                raise self.refuse(f"`{p.name}` of {self.name}() is a list of tensors, "
                                  f"e.g. {self.name}([x, y])")
            raw = list(raw.elts)
        if not raw or len(raw) > MAX_SEQUENCE:
            raise self.refuse(f"`{p.name}` of {self.name}() takes 1 to {MAX_SEQUENCE} tensors")
        return [self.to_node(a, False) for a in raw]

    def _static(self, p: OpParam, raw: Any) -> Any:
        items = raw if isinstance(raw, list) else None
        value = [literal(a, self.refuse) for a in items] if items is not None \
            else literal(raw, self.refuse)
        if isinstance(value, list):
            value = tuple(value)
        try:
            return check_static(p, value)
        except ValueError as exc:
            raise self.refuse(f"`{p.name}` of {self.name}() {exc}") from None


def literal(node: ast.AST, refuse: Callable[[str], UsageError]) -> Any:
    """A constant from the text: a number (negative too), string, bool, None, or a tuple or
    list of those. Anything else is refused; nothing is evaluated."""
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(
            node.value, bool | int | float | str)):
        if isinstance(node.value, str) and len(node.value) > 200:
            raise refuse("string arguments are at most 200 characters")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = literal(node.operand, refuse)
        if isinstance(inner, int | float) and not isinstance(inner, bool):
            return -inner if isinstance(node.op, ast.USub) else inner
    if dotted(node) in ("inf", "math.inf", "torch.inf"):  # norm(x, inf), ord=-math.inf
        return math.inf
    if isinstance(node, ast.Tuple | ast.List):
        if len(node.elts) > MAX_SEQUENCE:
            raise refuse(f"tuples are at most {MAX_SEQUENCE} elements long")
        return tuple(literal(e, refuse) for e in node.elts)
    raise refuse("this argument must be a constant (a number, a string, True/False/None or a "
                 "tuple of numbers)")


def _int(value: Any, limit: int = MAX_STATIC_INT) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= limit


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _whole(p: OpParam, value: Any) -> tuple[bool, str, Any]:
    """An int, ints or shape parameter: (fits, what it needs, the value), within the row's
    limit (`n: int<1024>`) where it has one."""
    limit = p.limit or MAX_STATIC_INT
    bounded = f" from {-limit} to {limit}" if p.limit is not None else ""
    if p.kind == "int":
        return _int(value, limit), f"must be a whole number{bounded}", value
    if _int(value) and p.kind == "shape" and not p.star:  # layer_norm(x, 8)
        value = (value,)
    ok = (_int(value, limit) and p.kind == "ints") or (
        isinstance(value, tuple) and all(_int(v, limit) for v in value))
    need = f"must be whole numbers{bounded}" + ("" if bounded else ", e.g. (3, 2)")
    return ok, need, value


def check_static(p: OpParam, value: Any) -> Any:
    """The value for a static parameter; ValueError saying what is wrong with it."""
    if value is None and p.default is None:
        return None
    kind, ok = p.kind, False
    if kind == "dim":
        ok, need = _int(value, MAX_DIM), "must be a whole number such as 0, 1 or -1"
    elif kind == "dims":
        ok = _int(value, MAX_DIM) or (isinstance(value, tuple) and bool(value) and all(
            _int(v, MAX_DIM) for v in value))
        need = "must be a dim or a tuple of dims such as (0, 1)"
    elif kind in ("int", "ints", "shape"):
        ok, need, value = _whole(p, value)
    elif kind == "order":  # a norm's order: a number (inf too) or 'fro' / 'nuc'
        ok = _number(value) or value in ("fro", "nuc")
        value = float(value) if _number(value) and not float(value).is_integer() else value
        need = "must be a number (inf too) or 'fro' or 'nuc'"
    elif kind == "sizes":  # output sizes: None keeps the input's (adaptive pooling)
        ok = _int(value) or (isinstance(value, tuple) and all(
            v is None or _int(v) for v in value))
        need = "must be whole numbers (or None for the input's size), e.g. (3, None)"
    elif kind == "floats":
        ok = _number(value) or (isinstance(value, tuple) and all(_number(v) for v in value))
        value = (float(value) if _number(value) else tuple(float(v) for v in value)) \
            if ok else value
        need = "must be a number or a tuple of numbers, e.g. (2.0, 1.5)"
    elif kind == "float":
        ok, need = isinstance(value, int | float) and not isinstance(value, bool), \
            "must be a number"
        value = float(value) if ok else value
    elif kind == "bool":
        ok, need = isinstance(value, bool), "must be True or False"
    elif kind == "str":
        ok = isinstance(value, str) and (not p.choices or value in p.choices)
        need = ("must be one of " + ", ".join(repr(c) for c in p.choices)) if p.choices \
            else "must be a string"
    elif kind == "contraction":  # tensordot's dims: a count, or the dims of each side
        ok = _int(value, MAX_DIM) or (isinstance(value, tuple) and len(value) == 2 and all(
            _int(v, MAX_DIM) or (isinstance(v, tuple) and all(_int(d, MAX_DIM) for d in v))
            for v in value))
        need = "must be a count of dims or two lists of dims, e.g. ([0, 1], [2, 0])"
    elif kind == "padding":
        ok = _int(value) or value in ("same", "valid") or (
            isinstance(value, tuple) and all(_int(v) for v in value))
        need = "must be a whole number, a tuple of them, 'same' or 'valid'"
    else:
        need = "is not a value gradscope can read"
    if not ok:
        raise ValueError(need)
    return value
