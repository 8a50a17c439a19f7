"""The Python API: one function per command, each returning the Report (never prints, never
exits). The CLI is a thin layer over these same calls via `pipeline.Request`.

    report = gradscope.vjp("3*a + 2*b*b + log(c)", a=..., b=..., c=..., grad=[0.1, 1, 1e-4])
    report = gradscope.check(KillHead, torch.randn(3, 8), 2)   # tensors and non-tensor args

Expression inputs are passed by name; a callable (Function, Module, function) takes positional
arguments in its forward's order — tensors are checked, anything else is passed through — or
tensors by name. Options: grad, tangent, dtype, eps, atol, rtol, seed, device, fail_on, shape,
max_elements, full, arg (non-tensor arguments by name), init (Module constructor), repeat.
"""

from __future__ import annotations

from typing import Any

from gradscope.report.model import Report
from gradscope.runner import Request, run


def _request(command: str, target: Any, args: tuple, inputs: dict[str, Any], *,
             grad: Any = None, tangent: Any = None, dtype: str = "float64",
             eps: float | None = None, atol: float | None = None, rtol: float | None = None,
             seed: int = 0, device: str = "cpu", fail_on: str = "mismatch",
             shape: Any = None, max_elements: int = 10_000, full: bool = False,
             arg: Any = None, init: Any = None, repeat: int = 1, order: int = 1,
             intermediates: bool = False, max_elements_total: int = 20_000_000,
             max_fd: int = 20_000, sample: int = 1_000) -> Request:
    shapes: dict[str, tuple[int, ...]] = {}
    default_shape = None
    if isinstance(shape, dict):
        shapes = {k: tuple(v) if not isinstance(v, int) else (v,) for k, v in shape.items()}
    elif shape is not None:
        default_shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if tangent is not None and not isinstance(tangent, dict):
        tangent = {"*": tangent}
    return Request(command=command, target=target, at=inputs, positional=tuple(args),
                   shapes=shapes,
                   default_shape=default_shape, grad=grad, tangent=tangent, dtype=dtype,
                   eps=eps, atol=atol, rtol=rtol, seed=seed, device=device, fail_on=fail_on,
                   max_elements=max_elements, full=full, args=dict(arg or {}),
                   init=dict(init or {}), repeat=repeat, order=order,
                   intermediates=intermediates, max_elements_total=max_elements_total,
                   max_fd=max_fd, sample=sample)


def check(target: Any, *args: Any, grad: Any = None, **options: Any) -> Report:
    """Per-element check of autograd against sympy and finite differences; the verdict also
    covers seeded random upstream vectors and, when small, the full Jacobian."""
    opts, inputs = _split(options)
    return run(_request("check", target, args, inputs, grad=grad, **opts))


def vjp(target: Any, *args: Any, grad: Any = None, tangent: Any = None,
        **options: Any) -> Report:
    """What `y.backward(grad)` computes, beside the symbolic and finite-difference results.
    With `tangent`, forward mode J·t is checked too."""
    opts, inputs = _split(options)
    return run(_request("jvp", target, args, inputs, grad=grad, tangent=tangent, **opts))


jvp = vjp


def jacobian(target: Any, *args: Any, **options: Any) -> Report:
    """The full Jacobian from each engine (small sizes only)."""
    opts, inputs = _split(options)
    return run(_request("jacobian", target, args, inputs, **opts))


_OPTIONS = {"dtype", "eps", "atol", "rtol", "seed", "device", "fail_on", "shape",
            "max_elements", "full", "arg", "init", "repeat", "order", "intermediates",
            "max_elements_total", "max_fd", "sample"}


def _split(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    opts = {k: v for k, v in options.items() if k in _OPTIONS}
    inputs = {k: v for k, v in options.items() if k not in _OPTIONS}
    return opts, inputs
