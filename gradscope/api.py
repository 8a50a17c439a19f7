"""The Python API: one function per command, each returning the Report (never prints, never
exits). The CLI and the run config make the same calls through `runner.run`.

    report = gradscope.vjp("3*a + 2*b*b + log(c)", a=..., b=..., c=..., grad=[0.1, 1, 1e-4])
    report = gradscope.check(KillHead, torch.randn(3, 8), 2)   # tensors and non-tensor args

Expression inputs are passed by name; a callable (Function, Module, function) takes positional
arguments in its forward's order — tensors are checked, anything else is passed through — or
tensors by name. Every other keyword is an option of `gradscope.options.Options` (grad,
tangent, dtype, eps, atol, rtol, seed, device, fail_on, shape, max_elements, full, arg, init,
repeat, order, intermediates, max_elements_total, max_fd, sample).
"""

from __future__ import annotations

from typing import Any

from gradscope.options import SPECS, Request, from_values
from gradscope.report.model import Report


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
    """Keywords that name an option are options; the others are inputs by name."""
    from gradscope.runner import run  # noqa: F401  (torch is imported on first use only)

    given = {k: v for k, v in keywords.items() if k in SPECS and v is not None}
    inputs = {k: v for k, v in keywords.items() if k not in SPECS}
    given["at"] = {**inputs, **given.get("at", {})}
    options = from_values(given, where=lambda name: name)
    return Request(command, target, options, positional=tuple(args))


def _run(command: str, target: Any, args: tuple[Any, ...], keywords: dict[str, Any]
         ) -> Report:
    from gradscope.runner import run

    return run(request(command, target, args, keywords))
