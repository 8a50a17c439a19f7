"""The Python API: one function per command, each returning the Report (never prints, never
exits). The CLI is a thin layer over these same calls via `pipeline.Request`.

    report = gradscope.vjp("3*a + 2*b*b + log(c)", a=..., b=..., c=..., grad=[0.1, 1, 1e-4])
"""

from __future__ import annotations

from typing import Any

from gradscope.errors import UsageError
from gradscope.pipeline import Request, run
from gradscope.report import Report


def _request(command: str, target: Any, args: tuple, inputs: dict[str, Any], *,
             grad: Any = None, tangent: Any = None, dtype: str = "float64",
             eps: float | None = None, atol: float | None = None, rtol: float | None = None,
             seed: int = 0, device: str = "cpu", fail_on: str = "mismatch",
             shape: Any = None, max_elements: int = 10_000, full: bool = False) -> Request:
    if args:
        raise UsageError("expression inputs are passed by name, e.g. check(\"x**2\", x=t)")
    shapes: dict[str, tuple[int, ...]] = {}
    default_shape = None
    if isinstance(shape, dict):
        shapes = {k: tuple(v) if not isinstance(v, int) else (v,) for k, v in shape.items()}
    elif shape is not None:
        default_shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if tangent is not None and not isinstance(tangent, dict):
        tangent = {"*": tangent}
    return Request(command=command, target=target, at=inputs, shapes=shapes,
                   default_shape=default_shape, grad=grad, tangent=tangent, dtype=dtype,
                   eps=eps, atol=atol, rtol=rtol, seed=seed, device=device, fail_on=fail_on,
                   max_elements=max_elements, full=full)


def _single_tangent(request: Request) -> Request:
    """`tangent=VALUE` (not a dict) is allowed when the target has exactly one input."""
    if request.tangent and "*" in request.tangent:
        from gradscope.targets import resolve

        names = resolve(request.target).names
        if len(names) != 1:
            raise UsageError(f"the target has {len(names)} inputs ({', '.join(names)}); "
                             "name the tangent's input: --tangent NAME=VALUE")
        request.tangent = {names[0]: request.tangent["*"]}
    return request


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
    return run(_single_tangent(_request("jvp", target, args, inputs, grad=grad,
                                        tangent=tangent, **opts)))


jvp = vjp


def jacobian(target: Any, *args: Any, **options: Any) -> Report:
    """The full Jacobian from each engine (small sizes only)."""
    opts, inputs = _split(options)
    return run(_request("jacobian", target, args, inputs, **opts))


_OPTIONS = {"dtype", "eps", "atol", "rtol", "seed", "device", "fail_on", "shape",
            "max_elements", "full"}


def _split(options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    opts = {k: v for k, v in options.items() if k in _OPTIONS}
    inputs = {k: v for k, v in options.items() if k not in _OPTIONS}
    return opts, inputs
