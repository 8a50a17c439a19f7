"""The Python API — the one front door: one function per command, each returning the Report
(never prints, never exits). `run(request)` is what `check`/`vjp`/`jacobian` call once they
have made a Request from their keywords; the CLI and the run config call it with theirs, and
`graph`/`sweep` likewise for those commands.

    report = gradscope.vjp("3*a + 2*b*b + log(c)", a=..., b=..., c=..., grad=[0.1, 1, 1e-4])
    report = gradscope.check(KillHead, torch.randn(3, 8), 2)   # tensors and non-tensor args

Expression inputs are passed by name; a callable (Function, Module, function) takes positional
arguments in its forward's order — tensors are checked, anything else is passed through — or
tensors by name. Every other keyword is an option of `gradscope.options.Options` (grad,
tangent, dtype, eps, atol, rtol, seed, device, fail_on, shape, max_elements, full, arg, init,
repeat, order, intermediates, max_elements_total, max_fd, sample).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gradscope import features, process
from gradscope.errors import UnknownName, UsageError
from gradscope.options import Request, from_values
from gradscope.report.model import Report

T = TypeVar("T")


def check(target: Any, *args: Any, grad: Any = None, **options: Any) -> Report:
    """Per-element check of autograd against sympy and finite differences; the verdict also
    covers seeded random upstream vectors and, when small, the full Jacobian."""
    return _run("check", target, args, {"grad": grad, **options})


def vjp(target: Any, *args: Any, grad: Any = None, tangent: Any = None,
        **options: Any) -> Report:
    """What `y.backward(grad)` computes, beside the symbolic and finite-difference results.
    With `tangent`, forward mode J·t is checked too."""
    return _run("jvp", target, args, {"grad": grad, "tangent": tangent, **options})


jvp = vjp


def jacobian(target: Any, *args: Any, **options: Any) -> Report:
    """The full Jacobian from each engine (small sizes only)."""
    return _run("jacobian", target, args, options)


def request(command: str, target: Any, args: tuple[Any, ...], keywords: dict[str, Any]
            ) -> Request:
    """Keywords that name an option are options; the others are inputs by name. An input
    whose name is also an option's (`eps`, `seed`) goes in `inputs={...}`, which holds
    inputs only."""
    keywords = dict(keywords)
    explicit = keywords.pop("inputs", None) or {}
    if not isinstance(explicit, Mapping):
        raise UsageError(f"inputs= takes a mapping of input names to values, got "
                         f"{type(explicit).__name__}")
    specs = features.every_spec()  # (the core's and the features' own options)
    given = {k: v for k, v in keywords.items() if k in specs and v is not None}
    inputs = {k: v for k, v in keywords.items() if k not in specs}
    twice = sorted(set(inputs) & set(explicit))
    if twice:
        raise UsageError(f"input `{twice[0]}` is given twice, as a keyword and in inputs=")
    _ambiguous(command, target, given, explicit)
    given["at"] = {**inputs, **explicit, **given.get("at", {})}
    options = from_values(given, where=lambda name: name, owned=features.owned_options())
    return Request(command, target, options, positional=tuple(args))


def _ambiguous(command: str, target: Any, given: Mapping[str, Any],
               explicit: Mapping[str, Any]) -> None:
    """An expression input named like an option (`eps`, `seed`) given as a keyword: which
    one was meant cannot be told, so the user says it with inputs={...}."""
    if not isinstance(target, str) or not given:
        return
    from gradscope.expr.parse import parse
    from gradscope.targets.loading import is_python_target

    if is_python_target(target):
        return
    try:
        names = set(parse(target).inputs)
    except UsageError:
        return  # the run reports the expression's own error
    both = sorted((set(given) & names) - set(explicit))
    if both:
        raise UsageError(f"`{both[0]}` is both an option of gradscope.{command}() and an input "
                         f"of the expression: pass the input as inputs={{'{both[0]}': …}} "
                         f"(a keyword `{both[0]}=` then sets the option)")


def deep_enough(fn: Callable[..., T]) -> Callable[..., T]:
    """`fn` with Python's recursion limit raised for the expressions the limits accept
    (process.deep): an expression nested 199 levels is parsed, built and differentiated."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> T:
        with process.deep():
            return fn(*args, **kwargs)

    return call


@deep_enough
def run(request: Request) -> Report:
    """One check as a Request says (command, target, options): what every way in calls."""
    from gradscope.runner import run as stages

    return stages(request)


@deep_enough
def graph(target: Any, *args: Any, grad: Any = None, **options: Any) -> Any:
    """`gradscope graph`: the backward graph with the gradient through every node, as a
    GraphReport (a notebook shows its picture; `.to_dict()` its data). Called like `check`
    (`gradscope.graph("sum(round(x) * w)", x="0.2,1.7", w="1,2")`), or with a Request."""
    from gradscope.tools.graph import graph as build

    if isinstance(target, Request) and not args and grad is None and not options:
        return build(target)
    return build(request("check", target, args, {"grad": grad, **options}))


@deep_enough
def sweep(target: Any, *args: Any, var: str | None = None, range: Any = None,
          points: int = 200, plot: Any = None, grad: Any = None, **options: Any) -> Any:
    """`gradscope sweep`: one input moved over a range, with f and both derivatives at every
    point, as a SweepReport (a notebook shows its picture; `.plot()`, `.save("s.svg")`,
    `.to_dict()`). The CLI's keywords: `var` (the input moved), `range` ("lo,hi" or a pair),
    `points`, `plot` (a file to write the picture to), and the options of `check`:

        gradscope.sweep("clamp_bug.py:ClampGradient", var="x", range=(-1, 2), points=61)

    (The older form `sweep(request, var, lo, hi, points)` still works.)"""
    from gradscope.tools.sweep import sweep as build

    if isinstance(target, Request):
        var, lo, hi, points = _older_sweep(args, var, range, points)
        report = build(target, var, lo, hi, points)
    else:
        if not isinstance(var, str) or not var:
            raise UsageError("gradscope.sweep() needs var=NAME: the input to move")
        lo, hi = read_range(range)
        report = build(request("check", target, args, {"grad": grad, **options}), var, lo, hi,
                       points, api=True)
    if plot is not None:
        report.save(plot)
    return report


def read_range(value: Any) -> tuple[float, float]:
    """A sweep's range: "lo,hi" (the CLI's text) or a pair of numbers."""
    if isinstance(value, str):
        parts = value.split(",")
    elif isinstance(value, list | tuple):
        parts = list(value)
    else:
        parts = []
    try:
        lo, hi = (float(str(p).strip()) for p in parts)
    except ValueError:
        raise UsageError(f"range {value!r}: expected LO,HI such as -2,2 (or a pair of "
                         "numbers)") from None
    return lo, hi


def _older_sweep(args: tuple[Any, ...], var: Any, range_: Any, points: int
                 ) -> tuple[str, float, float, int]:
    """sweep(request, var, lo, hi, points): the first API's positional form."""
    if len(args) == 4:
        name, lo, hi, count = args
        return name, float(lo), float(hi), int(count)
    if len(args) <= 1 and (var is not None or args):
        lo, hi = read_range(range_)
        return args[0] if args else var, lo, hi, points
    raise UsageError("gradscope.sweep(request, var, lo, hi, points), or sweep(target, "
                     "var=..., range=(lo, hi), points=...)")


@deep_enough
def _run(command: str, target: Any, args: tuple[Any, ...], keywords: dict[str, Any]
         ) -> Report:
    try:
        return run(request(command, target, args, keywords))
    except UnknownName as exc:
        if exc.option != "--at":
            raise
        raise UsageError(_unknown_keyword(command, exc.name, exc.known)) from exc


def _unknown_keyword(command: str, name: str, inputs: tuple[str, ...]) -> str:
    """An unknown keyword in the API's words: neither an option nor an input, and the
    closest names of either."""
    close = difflib.get_close_matches(name, [*features.every_spec(), *inputs], n=2)
    hint = f"; did you mean {' or '.join(f'`{c}`' for c in close)}?" if close else ""
    return (f"gradscope.{command}() got `{name}=`, which is neither one of its options nor an "
            f"input of the target (inputs: {', '.join(inputs) or 'none'}){hint}")


def _documented(fn: Any, command: str, *named: str) -> None:
    """`fn`'s signature and docstring list every option the command takes (its type and
    default), as `help(gradscope.check)` and editors show them: what `**options` hides."""
    import inspect
    import textwrap

    from gradscope.options import DEFAULTS

    kinds = {list: "list[str] | Mapping[str, Any]", bool: "bool", int: "int", float: "float",
             str: "str"}
    params = [inspect.Parameter("target", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation="str | Callable"),
              inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL, annotation="Any")]
    lines = []
    owned = features.owned_options()
    for name, spec in features.every_spec().items():
        if command not in spec.commands:
            continue
        default = owned[name].default if name in owned else getattr(DEFAULTS, name)
        kind = "Any" if spec.value else kinds.get(spec.cli, "Any")
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                        default=None if name in named else default,
                                        annotation=f"{kind} | None" if default is None
                                        else kind))
        lines.append(textwrap.fill(f"{name}: {' '.join(spec.help.split())}", 96,
                                   initial_indent="    ", subsequent_indent="        "))
    params.append(inspect.Parameter("inputs_by_name", inspect.Parameter.VAR_KEYWORD,
                                    annotation="Any"))
    fn.__signature__ = inspect.Signature(params, return_annotation="Report")
    fn.__doc__ = (f"{fn.__doc__}\n\n    Inputs by name are keywords that name no option (or "
                  "`inputs={...}`); the options:\n\n" + "\n".join(lines))


for _fn, _command in ((check, "check"), (vjp, "jvp"), (jacobian, "jacobian")):
    _documented(_fn, _command, "grad", "tangent")
