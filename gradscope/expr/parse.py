"""Expression text → IR, through Python's `ast` and a whitelist. Nothing here ever evaluates text.

Only numbers, names, the operators `+ - * / ** @`, unary `-`/`+`, comparisons as the condition of
`where`, and calls of op-table functions get through; everything else is refused with a
UsageError that names what was refused and what is allowed. Sizes are bounded before any work:
text length, nesting depth, node count, number of inputs, and constant exponents.
"""

from __future__ import annotations

import ast
import math
import re

from gradscope.errors import UsageError
from gradscope.expr import ir
from gradscope.expr.ops import (
    BINARY,
    COMPARE,
    COMPARISONS,
    CONSTANTS,
    FUNCTIONS,
    MAX_EXPONENT,
    OPS,
    UNARY,
)

MAX_TEXT = 2000
MAX_DEPTH = 200  # left-associative chains (a + b + c ...) nest one level per term
MAX_NODES = 400
MAX_INPUTS = 32
MAX_NAME = 64
NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")

ALLOWED = ("allowed: numbers, input names, + - * / ** @, unary - and +, parentheses, "
           "comparisons inside where(), constants pi and e, and the functions listed by "
           "`gradscope ops`")


def function_list() -> str:
    return " ".join(sorted(FUNCTIONS))


def parse(text: str) -> ir.Expression:
    """Parse `text` into an Expression, or raise UsageError saying what was refused."""
    if not isinstance(text, str):
        raise UsageError(f"an expression must be text, got {type(text).__name__}")
    if len(text) > MAX_TEXT:
        raise UsageError(f"expression is {len(text)} characters long; the limit is {MAX_TEXT}")
    if not text.isascii():
        bad = next(ch for ch in text if not ch.isascii())
        raise UsageError(f"refused character {bad!r}: expressions are ASCII text; {ALLOWED}")
    if not text.strip():
        raise UsageError("the expression is empty; example: \"3*a + 2*b*b + log(c)\"")
    # Keep offsets valid for spans while letting a pasted multi-line expression through.
    source = text.replace("\n", " ").replace("\r", " ").replace("\t", " ").strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        where = f" at column {exc.offset}" if exc.offset else ""
        raise UsageError(f"cannot parse expression {text!r}{where}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise UsageError(f"cannot parse expression: {exc}") from None
    _check_size(tree.body)
    builder = _Builder(source)
    root = builder.node(tree.body, allow_compare=False)
    if not builder.inputs:
        raise UsageError(f"expression {text!r} has no inputs: name at least one, e.g. \"x**2\"")
    return ir.Expression(source=source, root=root, inputs=tuple(builder.inputs))


def _check_size(root: ast.AST) -> None:
    """Count expression nodes only (operator and context tokens are not work)."""
    count, stack = 0, [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, ast.expr):
            continue
        count += 1
        if depth > MAX_DEPTH:
            raise UsageError(f"expression is nested more than {MAX_DEPTH} levels deep")
        if count > MAX_NODES:
            raise UsageError(f"expression has more than {MAX_NODES} syntax nodes; split it up")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


class _Builder:
    def __init__(self, source: str) -> None:
        self.source = source
        self.inputs: list[str] = []

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (node.col_offset, node.end_col_offset or node.col_offset)  # type: ignore[attr-defined]

    def snippet(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def refuse(self, node: ast.AST, what: str) -> UsageError:
        return UsageError(f"refused `{self.snippet(node)}`: {what}; {ALLOWED}")

    def node(self, node: ast.AST, allow_compare: bool) -> ir.Node:
        span = self.span(node)
        if isinstance(node, ast.Constant):
            return self.number(node)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.UnaryOp):
            op = UNARY.get(type(node.op).__name__)
            if op is None:
                raise self.refuse(node, f"operator {type(node.op).__name__} is not allowed")
            return ir.Call(span, op, (self.node(node.operand, False),))
        if isinstance(node, ast.BinOp):
            op = BINARY.get(type(node.op).__name__)
            if op is None:
                raise self.refuse(node, f"operator {type(node.op).__name__} is not allowed")
            left, right = self.node(node.left, False), self.node(node.right, False)
            call = ir.Call(span, op, (left, right))
            _check_exponent(self.snippet(node), call)
            return call
        if isinstance(node, ast.Compare):
            if not allow_compare:
                raise self.refuse(node, "comparisons are allowed only as the condition of "
                                        "where(cond, a, b)")
            if len(node.ops) != 1:
                raise self.refuse(node, "chained comparisons are not allowed; "
                                        "nest where() instead")
            op = COMPARISONS.get(type(node.ops[0]).__name__)
            if op is None:
                raise self.refuse(node, "only < <= > >= are allowed as comparisons")
            return ir.Call(span, op, (self.node(node.left, False),
                                      self.node(node.comparators[0], False)))
        if isinstance(node, ast.Call):
            return self.call(node)
        kind = {
            ast.Attribute: "attribute access is not allowed",
            ast.Subscript: "subscripts are not allowed",
            ast.Lambda: "lambda is not allowed",
            ast.BoolOp: "and/or are not allowed; use where()",
        }.get(type(node), f"{type(node).__name__} syntax is not allowed")
        raise self.refuse(node, kind)

    def number(self, node: ast.Constant) -> ir.Num:
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.refuse(node, "only real numbers are allowed as constants")
        try:
            as_float = float(value)
        except OverflowError:
            raise self.refuse(node, "number is too large") from None
        if not math.isfinite(as_float):
            raise self.refuse(node, "number is too large")
        return ir.Num(self.span(node), as_float, isinstance(value, int))

    def name(self, node: ast.Name) -> ir.Node:
        name = node.id
        if name in CONSTANTS:
            return ir.Const(self.span(node), name, CONSTANTS[name])
        if name in FUNCTIONS:
            raise self.refuse(node, f"`{name}` is a function; call it, e.g. {name}(x)")
        if not NAME_RE.match(name) or len(name) > MAX_NAME:
            raise self.refuse(node, "input names are letters, digits and _, starting with a "
                                    f"letter, at most {MAX_NAME} characters")
        if name not in self.inputs:
            if len(self.inputs) >= MAX_INPUTS:
                raise self.refuse(node, f"more than {MAX_INPUTS} inputs")
            self.inputs.append(name)
        return ir.Var(self.span(node), name)

    def call(self, node: ast.Call) -> ir.Node:
        if not isinstance(node.func, ast.Name):
            raise self.refuse(node, "only calls of the listed functions by name are allowed")
        name = node.func.id
        op = FUNCTIONS.get(name)
        if op is None:
            raise UsageError(f"refused `{self.snippet(node)}`: unknown function `{name}`; "
                             f"allowed functions: {function_list()}")
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.refuse(node, "*args are not allowed")
        raw = list(node.args)
        for kw in node.keywords:
            if kw.arg == "dim" and op.takes_dim and len(raw) == 1:
                raw.append(kw.value)
            else:
                raise self.refuse(node, f"keyword argument `{kw.arg}` is not allowed"
                                  + (" (dim= only, once)" if op.takes_dim else ""))
        low, high = op.arity
        if not low <= len(raw) <= high:
            want = str(low) if low == high else f"{low} or {high}"
            raise UsageError(f"refused `{self.snippet(node)}`: {name} takes {want} "
                             f"argument{'s' if high > 1 else ''}, got {len(raw)} ({op.summary})")
        args: list[ir.Node] = []
        for i, arg in enumerate(raw):
            if op.takes_dim and i == 1:
                args.append(self.dim(node, arg))
            else:
                args.append(self.node(arg, allow_compare=(i == op.condition_arg)))
        k = op.condition_arg
        if k is not None and not (isinstance(args[k], ir.Call) and OPS[args[k].op].kind
                                  == COMPARE):
            raise self.refuse(node, f"argument {k + 1} of {name}() must be a comparison, "
                                    "e.g. where(x > 0, x, 0)")
        call = ir.Call(self.span(node), name, tuple(args))
        _check_exponent(self.snippet(node), call)
        return call

    def dim(self, call: ast.Call, arg: ast.AST) -> ir.Num:
        value = None
        if isinstance(arg, ast.Constant):
            value = arg.value
        elif (isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub)
              and isinstance(arg.operand, ast.Constant)):
            value = arg.operand.value
            value = -value if isinstance(value, int) and not isinstance(value, bool) else None
        if not isinstance(value, int) or isinstance(value, bool) or abs(value) > 64:
            raise self.refuse(call, "dim must be a whole number such as 0, 1 or -1")
        return ir.Num(self.span(arg), float(value), True)


def constant_value(node: ir.Node) -> float | None:
    """The value of a constant subtree (numbers, pi, e, and ops with a `fold` such as
    arithmetic), else None; NaN where it overflows or is not a real number."""
    if isinstance(node, ir.Num | ir.Const):
        return node.value
    if not isinstance(node, ir.Call) or OPS[node.op].fold is None:
        return None
    vals = [constant_value(a) for a in node.args]
    if any(v is None for v in vals):
        return None
    try:
        result = OPS[node.op].fold(*vals)
    except (ZeroDivisionError, OverflowError, ValueError):
        return math.nan
    return float(result) if math.isfinite(result) else math.nan


def _check_exponent(snippet: str, call: ir.Call) -> None:
    """A constant exponent (of a row with `exponent_arg`) is bounded, and so is the constant
    it makes."""
    position = OPS[call.op].exponent_arg
    if position is None:
        return
    value = constant_value(call.args[position])
    if value is None:
        return
    if math.isnan(value):
        raise UsageError(f"refused `{snippet}`: the exponent is not a finite number "
                         f"(constant exponents are limited to |e| <= {MAX_EXPONENT:g})")
    if abs(value) > MAX_EXPONENT:
        raise UsageError(f"refused `{snippet}`: exponent {value:g} is too large "
                         f"(constant exponents are limited to |e| <= {MAX_EXPONENT:g})")
    combined = constant_value(call)
    if combined is not None and math.isnan(combined):
        raise UsageError(f"refused `{snippet}`: the constant overflows or is not a real number")
