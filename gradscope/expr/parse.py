"""Expression text → IR, through Python's `ast` and a whitelist. Nothing here ever evaluates text.

Only numbers, names, the operators `+ - * / ** @`, unary `-`/`+`, comparisons as the condition of
`where`, and calls of op-table functions get through; everything else is refused with a
UsageError that names what was refused and what is allowed. Sizes are bounded before any work:
text length, nesting depth, node count, number of inputs, and constant exponents.
"""

from __future__ import annotations

# Long: one whitelist — every syntax form an expression may use is refused or built here, in
# one place a reviewer reads whole; the op table and calls.py hold the rest.
import ast
import math
import re

from gradscope.errors import UsageError
from gradscope.expr import calls, ir
from gradscope.expr.ops import (
    ATTRIBUTES,
    BINARY,
    COMPARE,
    COMPARISONS,
    CONSTANTS,
    FUNCTIONS,
    MAX_EXPONENT,
    METHODS,
    MODULE_ROOTS,
    OPS,
    UNARY,
    Op,
)

MAX_TEXT = 2000
MAX_DEPTH = 200  # left-associative chains (a + b + c ...) nest one level per term
MAX_NODES = 400
MAX_INPUTS = 32
MAX_NAME = 64
NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")

ALLOWED = ("allowed: numbers, input names, + - * / ** @, unary - and +, parentheses, "
           "comparisons inside where(), constants pi and e, the functions listed by "
           "`gradscope ops` (also as torch.f / F.f / tensor methods), .T, .mT, and subscripts "
           "with constant ints, slices, None and ...")
MAX_INDEX = 1 << 31


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
    _check_picked(source, root)
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
        # each syntax node is parsed once: a call bound against a second row (max → maximum,
        # where with a mask) reuses its arguments' parse, or nesting would double the work
        # per level (22 nested calls: minutes)
        self.parsed: dict[tuple[int, bool], ir.Node | UsageError] = {}

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (node.col_offset, node.end_col_offset or node.col_offset)  # type: ignore[attr-defined]

    def snippet(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.source[start:end]

    def refuse(self, node: ast.AST, what: str) -> UsageError:
        return UsageError(f"refused `{self.snippet(node)}`: {what}; {ALLOWED}")

    def plain(self, node: ast.AST, what: str) -> UsageError:
        """A refusal about how a known function was called (the call's usage says the rest)."""
        return UsageError(f"refused `{self.snippet(node)}`: {what}")

    def node(self, node: ast.AST, allow_compare: bool) -> ir.Node:
        key = (id(node), allow_compare)
        found = self.parsed.get(key)
        if found is None:
            try:
                found = self._node(node, allow_compare)
            except UsageError as exc:
                found = exc
            self.parsed[key] = found
        if isinstance(found, UsageError):
            raise found
        return found

    def _node(self, node: ast.AST, allow_compare: bool) -> ir.Node:
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
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        kind = {
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
        if name == "inf":  # where(m, x, -inf), masked_fill(x, m, -inf): torch's inf
            return ir.Num(self.span(node), math.inf, False)
        if name in FUNCTIONS and len(name) > 1:  # one letter is an input: `t` for targets
            raise self.refuse(node, f"`{name}` is a function; call it, e.g. {name}(x)")
        if name in MODULE_ROOTS:
            raise self.refuse(node, f"`{name}` is a module: call one of its functions, e.g. "
                                    f"{name}.sum(x)")
        if not NAME_RE.match(name) or len(name) > MAX_NAME:
            raise self.refuse(node, "input names are letters, digits and _, starting with a "
                                    f"letter, at most {MAX_NAME} characters")
        if name not in self.inputs:
            if len(self.inputs) >= MAX_INPUTS:
                raise self.refuse(node, f"more than {MAX_INPUTS} inputs")
            self.inputs.append(name)
        return ir.Var(self.span(node), name)

    def call(self, node: ast.Call) -> ir.Node:
        func, positional = node.func, list(node.args)
        if any(isinstance(a, ast.Starred) for a in positional):
            raise self.refuse(node, "*args are not allowed")
        op, name = self.callee(node, func, positional)
        if not op.expression:
            raise calls.unknown(self.snippet(node), name, method=False)
        def bind(op: Op, name: str) -> calls.BoundCall:
            return calls.Binder(op, name, self.snippet(node),
                                lambda a, cond: self.node(a, allow_compare=cond),
                                lambda what: self.plain(node, what)
                                ).bind(positional, list(node.keywords))

        try:
            bound = bind(op, name)
        except UsageError:
            if op.otherwise is None or op.condition_arg is not None or len(positional) < 2 \
                    or _is_literal(positional[1]):
                raise
            op, name = OPS[op.otherwise], op.otherwise  # max(x, y): torch's maximum(x, y)
            bound = bind(op, name)
        k = op.condition_arg
        if k is not None and not (isinstance(bound.args[k], ir.Call) and OPS[bound.args[k].op]
                                  .kind == COMPARE):
            if op.otherwise is None or not isinstance(bound.args[k], ir.Var):
                raise self.refuse(node, f"argument {k + 1} of {name}() must be a comparison "
                                        "or a bool mask given as data, e.g. where(x > 0, x, "
                                        "0) or where(m, x, 0) with --const m=...")
            op, name = OPS[op.otherwise], op.otherwise  # where(mask, x, y): a mask as data
            bound = bind(op, name)
        span = self.span(node)
        args = tuple(a if a.span != (0, 0) else ir.Num(span, a.value, a.is_int)  # type: ignore[attr-defined]
                     for a in bound.args)
        call = ir.Call(span, op.name, args, bound.params, bound.names)
        _check_exponent(self.snippet(node), call)
        return call

    def callee(self, node: ast.Call, func: ast.AST, positional: list[ast.AST]
               ) -> tuple[Op, str]:
        """The row a call asks for, and the name it was called by (a tensor method puts its
        tensor first in `positional`)."""
        if isinstance(func, ast.Attribute) and (calls.dotted(func.value) or "").partition(
                ".")[0] in ("np", "numpy"):  # (else read as a method of an input named np)
            raise self.plain(node, "numpy is not torch: an expression is written with torch's "
                                   f"functions (`{func.attr}(x)`, `torch.{func.attr}(x)` or "
                                   f"`x.{func.attr}()`)")
        if isinstance(func, ast.Name):
            name = func.id
            op = FUNCTIONS.get(name)
            if op is None:
                raise calls.unknown(self.snippet(node), name, method=False)
        elif isinstance(func, ast.Attribute) and calls.dotted(func) in FUNCTIONS and \
                "." in (calls.dotted(func) or ""):  # linalg.eigh(x), special.entr(x)
            name = calls.dotted(func) or ""
            op = FUNCTIONS[name]
        elif isinstance(func, ast.Attribute) and calls.is_module(func.value):
            path = calls.dotted(func) or func.attr
            name = calls.function_name(path)
            op = FUNCTIONS.get(name)
            if op is None:
                raise calls.unknown(self.snippet(node), path, method=False)
        elif isinstance(func, ast.Attribute):
            name = func.attr
            op = METHODS.get(name)
            if op is None:
                raise calls.unknown(self.snippet(node), name, method=True)
            positional.insert(0, func.value)
        else:
            raise self.refuse(node, "only calls of the listed functions and tensor methods "
                                    "are allowed")
        return op, name

    def attribute(self, node: ast.Attribute) -> ir.Node:
        if calls.dotted(node) in ("math.inf", "torch.inf", "np.inf", "numpy.inf"):
            return ir.Num(self.span(node), math.inf, False)
        if calls.is_module(node.value):
            raise self.refuse(node, "module attributes are not values; call a function")
        name = node.attr
        # the value is parsed once: parsing it again per attribute would double the work at
        # each `.T` of a call, exponential in a chain such as x.sum().T.sum().T...
        inner = self.node(node.value, False) if isinstance(node.value, ast.Call) else None
        if _tuple_call(inner):
            assert isinstance(inner, ir.Call)
            return self.pick(node, inner, name)
        if name == "values" and inner is not None:
            if _returns_values(inner):
                return inner  # max(x, 1).values: the expression already means the values
            raise self.refuse(node, "`.values` follows only max/min/... called with a dim")
        op = ATTRIBUTES.get(name)
        if op is None and name in METHODS:
            raise self.refuse(node, f"`.{name}` is a method: call it, e.g. x.{name}(...)")
        if op is None:
            allowed = ", ".join(f".{a}" for a in ATTRIBUTES)
            raise self.refuse(node, f"attribute `.{name}` is not allowed (attributes: "
                                    f"{allowed}, and .values after max/min with a dim)")
        value = inner if inner is not None else self.node(node.value, False)
        return ir.Call(self.span(node), op, (value,))

    def subscript(self, node: ast.Subscript) -> ir.Node:
        value = self.node(node.value, False)
        if _tuple_call(value):
            assert isinstance(value, ir.Call)
            item = node.slice
            k = calls.literal(item, lambda what: self.refuse(node, what)) \
                if isinstance(item, ast.Constant | ast.UnaryOp) else None
            if type(k) is not int:
                raise self.plain(node, f"{value.op}() returns a tuple: pick one part with a "
                                       "constant index such as [0]")
            return self.pick(node, value, k)
        if _returns_values(value) and isinstance(node.slice, ast.Constant) and \
                type(node.slice.value) is int and node.slice.value == 0:
            return value  # max(x, 1)[0]: the values, which the expression already means
        if _returns_values(value):
            raise self.plain(node, "torch returns (values, indices) here; gradscope reads it "
                                   "as the values: write .values or [0], or leave the "
                                   "subscript off")
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        index = tuple(self.index_item(node, item) for item in items)
        return ir.Call(self.span(node), "index", (value,), (("index", index),))

    def pick(self, node: ast.AST, call: ir.Call, which: str | int) -> ir.Call:
        """One part of a tuple torch returns (`sort(x).values`, `chunk(x, 2)[1]`)."""
        fields = OPS[call.op].returns
        named = [f for f in fields if f != "*"]
        k = which if isinstance(which, int) else (named.index(which) if which in named
                                                   else None)
        if k is None or (fields != ("*",) and not -len(fields) <= k < len(fields)):
            parts = ", ".join(named) if named else "its parts by index"
            raise self.plain(node, f"{call.op}() returns ({parts}); pick one with "
                                   f"{_picks(named)}")
        if named and named[k] in OPS[call.op].data_fields:
            rest = [f for f in named if f not in OPS[call.op].data_fields]
            raise self.plain(node, f"`{named[k]}` of {call.op}() is not a part gradscope "
                                   "differentiates (integer data, or defined only up to a "
                                   f"sign); check {_picks(rest)}")
        return ir.Call(self.span(node), call.op, call.args, (*call.params, ("_item", k)),
                       call.names)

    def index_item(self, node: ast.Subscript, item: ast.AST) -> tuple:
        def whole(part: ast.AST | None) -> int | None:
            if part is None:
                return None
            value = calls.literal(part, lambda what: self.refuse(node, what)) \
                if isinstance(part, ast.Constant | ast.UnaryOp) else "bad"
            if not isinstance(value, int) or isinstance(value, bool) or abs(value) > MAX_INDEX:
                raise self.refuse(node, "subscripts take constant ints, slices of them, None "
                                        "and ... (no tensors or names)")
            return value

        if isinstance(item, ast.Slice):
            step = whole(item.step)
            if step is not None and step <= 0:
                raise self.plain(node, "slice steps must be positive (torch has no negative "
                                       "steps; flip() reverses)")
            return ("slice", whole(item.lower), whole(item.upper), step)
        if isinstance(item, ast.Constant) and item.value is None:
            return ("none",)
        if isinstance(item, ast.Constant) and item.value is Ellipsis:
            return ("ellipsis",)
        return ("int", whole(item))


def _tuple_call(node: ir.Node | None) -> bool:
    """A call of a row torch answers with a tuple, no part picked yet."""
    return isinstance(node, ir.Call) and bool(OPS[node.op].returns) and \
        "_item" not in node.kwargs


def _picks(named: list[str]) -> str:
    return " or ".join([f".{f}" for f in named] + ["[0]"]) if named else "[0], [1], ..."


def _check_picked(source: str, root: ir.Node) -> None:
    """Every tuple torch returns has one part picked: the expression is one tensor."""
    for node in ir.walk(root):
        if _tuple_call(node):
            assert isinstance(node, ir.Call)
            op = OPS[node.op]
            named = [f for f in op.returns if f != "*" and f not in op.data_fields]
            start, end = node.span
            raise UsageError(f"refused `{source[start:end]}`: {node.op}() returns a tuple; "
                             f"pick the part to check with {_picks(named)}")


def _returns_values(node: ir.Node) -> bool:
    """A call torch answers with (values, indices) (max(x, 1), max_pool3d(x, 2,
    return_indices=True)): the IR means the values."""
    return isinstance(node, ir.Call) and any(
        k in OPS[node.op].values_when and v is not None and v is not False
        for k, v in node.params)


def _is_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant | ast.Tuple | ast.List)


def constant_value(node: ir.Node) -> float | None:
    """The value of a constant subtree (numbers, pi, e, and ops with a `fold` such as
    arithmetic), else None; NaN where it overflows or is not a real number."""
    if isinstance(node, ir.Num | ir.Const):
        return node.value
    if not isinstance(node, ir.Call) or OPS[node.op].fold is None or node.params:
        return None  # (a fold takes numbers only: div with a rounding_mode is not one)
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
