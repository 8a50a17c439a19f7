"""A drop-in for `torch.autograd.gradcheck` / `gradgradcheck`: torch's signatures and defaults,
gradscope's checks and explanations.

    from gradscope import gradcheck            # instead of: from torch.autograd import gradcheck
    assert gradcheck(fn, (x, weight, index))   # True, or raises gradscope.GradcheckError

As in torch, only floating tensors with `requires_grad` are checked; everything else is passed
to `func` untouched (no casts). Tuple and list outputs are supported: every differentiable
output is checked (they are laid end to end), the others are skipped; a function none of whose
outputs is differentiable must have a zero numerical Jacobian. The check is gradscope's: every
element by finite differences with an error estimate (a seeded sample plus random projections
past `--max-fd` elements), in the inputs' own dtype, with gradscope's tolerances for it unless
`atol`/`rtol`/`eps` are given other values than torch's defaults (then they are used, `eps` as a
relative step). Strict where gradcheck is: a NaN, an element at a kink or jump, an undeclared
surrogate or an input nothing was compared for fails, with the explanation in the error.
`fast_mode=True` compares one random projection vᵀJu from both sides (about what torch's fast
mode costs) and drills down to the per-element check the moment it disagrees. The plumbing
checks torch owns (`check_undefined_grad` for custom Functions, `check_batched_grad`,
`check_forward_ad`, `check_batched_forward_grad`, `check_grad_dtypes`, `masked`) are run by
torch's own gradcheck in fast mode after gradscope's check passed. Complex inputs or outputs
go to torch's gradcheck whole.
"""

from __future__ import annotations

import inspect
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.engines.fd.policy import DEFAULT_EPS, clamped
from gradscope.errors import GradscopeError, TargetError, UsageError
from gradscope.report.model import Report
from gradscope.report.status import Status
from gradscope.tensors import grad_nodes
from gradscope.testing.assertions import as_called, drop_in_failure
from gradscope.testing.stats import STATS

_torch_gradcheck = sys.modules["torch.autograd.gradcheck"]
# torch's own functions, kept before any switch replaces them (the drop-in calls them itself)
TORCH_GRADCHECK = _torch_gradcheck.gradcheck
TORCH_GRADGRADCHECK = _torch_gradcheck.gradgradcheck
TORCH_DEFAULTS = {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3}
STRICT = (Status.MISMATCH, Status.UNDEFINED, Status.NONDIFFERENTIABLE, Status.INCONCLUSIVE)
FAST_SEED = 0x5EED


class GradcheckError(_torch_gradcheck.GradcheckError):
    """gradcheck failed; the message is gradscope's explanation, `report` the whole Report
    (None when torch's own plumbing checks failed)."""

    def __init__(self, message: str, report: Report | None = None) -> None:
        super().__init__(message)
        self.report = report


@dataclass
class GradcheckCall:
    """One gradcheck call: the function, its arguments, which of them are checked."""

    func: Callable[..., Any]
    args: tuple[Any, ...]
    checked: list[int]  # positions of floating tensors that require grad
    names: list[str]
    outputs: list[int] = field(default_factory=list)  # positions of differentiable outputs
    float_outputs: list[int] = field(default_factory=list)  # positions of floating outputs
    single: bool = True  # func returned one tensor (not a tuple or list)
    complex: bool = False  # a complex input or output: torch's gradcheck runs it whole

    @classmethod
    def of(cls, func: Callable[..., Any], inputs: Any) -> GradcheckCall:
        args = tuple(inputs) if isinstance(inputs, tuple | list) else (inputs,)
        checked = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)
                   and a.requires_grad and (a.is_floating_point() or a.is_complex())]
        if not checked:
            raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                             "but none of the them have requires_grad=True.")
        call = cls(func, args, checked, _names(func, len(args), checked))
        out = func(*args)
        call.single = isinstance(out, torch.Tensor)
        outs = [out] if call.single else list(out) if isinstance(out, tuple | list) else None
        if outs is None:
            raise GradscopeError(f"gradcheck: func returned {type(out).__name__}; expected a "
                                 "tensor or a tuple/list of tensors")
        call.outputs = [k for k, o in enumerate(outs) if isinstance(o, torch.Tensor)
                        and o.requires_grad and (o.is_floating_point() or o.is_complex())]
        call.float_outputs = [k for k, o in enumerate(outs)
                              if isinstance(o, torch.Tensor) and o.is_floating_point()]
        call.complex = any(args[i].is_complex() for i in checked) or any(
            isinstance(o, torch.Tensor) and o.is_complex() for o in outs)
        return call

    def wrapped_outputs(self) -> list[torch.Tensor]:
        """The differentiable outputs at the given arguments."""
        out = self.func(*self.args)
        outs = [out] if self.single else list(out)
        return [outs[k] for k in self.outputs]

    def tensors(self) -> list[torch.Tensor]:
        return [self.args[i] for i in self.checked]

    def wrapped(self, which: list[int] | None = None) -> Callable[..., torch.Tensor]:
        """func of the checked tensors alone, its outputs `which` (default: the
        differentiable ones) laid end to end (one output keeps its shape)."""
        picked = self.outputs if which is None else which

        def run(*tensors: torch.Tensor) -> torch.Tensor:
            full = list(self.args)
            for pos, t in zip(self.checked, tensors, strict=True):
                full[pos] = t
            out = self.func(*full)
            outs = [out] if self.single else list(out)
            chosen = [outs[k] for k in picked]
            if len(chosen) == 1:
                return chosen[0]
            dtype = chosen[0].dtype
            for c in chosen[1:]:
                dtype = torch.promote_types(dtype, c.dtype)
            return torch.cat([c.reshape(-1).to(dtype) for c in chosen])

        params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                  for n in self.names]
        run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        run.__name__ = run.__qualname__ = _label(self.func)
        return run


def _label(func: Callable[..., Any]) -> str:
    """`MyFunction.apply`, `my_fn`, `Conv2d` — what the report calls the target."""
    owner = getattr(func, "__self__", None)
    if isinstance(owner, type):
        return f"{owner.__name__}.{getattr(func, '__name__', 'apply')}"
    if isinstance(func, torch.nn.Module):
        return type(func).__name__
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", "func")


def _names(func: Callable[..., Any], count: int, checked: list[int]) -> list[str]:
    """The checked inputs' names: the parameters of func where it has readable ones."""
    names: list[str] = []
    try:
        params = [p for p in inspect.signature(func).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    for i in checked:
        name = params[i].name if i < len(params) else f"input{i}"
        name = name if name.isidentifier() and not name.startswith("_") else f"input{i}"
        names.append(name if name not in names else f"{name}{i}")
    return names


def _options(call: GradcheckCall, eps: float, atol: float, rtol: float, nondet_tol: float
             ) -> dict[str, Any]:
    dtypes = {call.args[i].dtype for i in call.checked}
    dtype = str(dtypes.pop()).removeprefix("torch.") if len(dtypes) == 1 else "float64"
    options: dict[str, Any] = {"dtype": dtype, "fail_on": "mismatch", "nondet_tol": nondet_tol,
                               "device": str(call.args[call.checked[0]].device)}
    given = {"eps": eps, "atol": atol, "rtol": rtol}
    for key, value in given.items():  # torch's defaults: gradscope's (tighter, dtype-aware)
        if value != TORCH_DEFAULTS[key]:
            options[key] = clamped(value) if key == "eps" else value
    return options


def _full(call: GradcheckCall, options: dict[str, Any]) -> Report:
    from gradscope.api import check

    return check(call.wrapped(), *call.tensors(), **options)


def _fast_agrees(call: GradcheckCall, options: dict[str, Any], atol: float, rtol: float) -> bool:
    """vᵀ(J·u) by the finite-difference engine's four-point directional derivative against
    (Jᵀv)·u by one backward, for seeded random u (over every checked element) and v (over
    every output element)."""
    gen = torch.Generator().manual_seed(FAST_SEED)
    xs = [t.detach() for t in call.tensors()]
    us = [torch.randn(x.shape, generator=gen, dtype=torch.float64).to(x) for x in xs]
    leaves = [x.clone().requires_grad_(True) for x in xs]
    out = call.wrapped()(*leaves)
    if not bool(torch.isfinite(out).all()):
        return False
    v = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out)
    grads = torch.autograd.grad(out, leaves, v, allow_unused=True)
    ag = sum(float((g.double() * u.double()).sum()) for g, u in zip(grads, us, strict=True)
             if g is not None)
    fd = _differences(call, call.outputs, getattr(torch, options["dtype"]),
                      options.get("eps", DEFAULT_EPS))
    with torch.no_grad():
        along = fd.directional(dict(zip(call.names, us, strict=True)))
    vd = v.double()
    projected = float((vd * along.value.double()).sum())
    slack = atol + rtol * abs(projected) + 3 * float((vd.abs() * along.error.double()).sum())
    return math.isfinite(ag) and math.isfinite(projected) and abs(ag - projected) <= slack


def _differences(call: GradcheckCall, outputs: list[int], dtype: torch.dtype, eps: float) -> Any:
    """The finite-difference engine over func's checked tensors (by name), outputs `outputs`."""
    from gradscope.engines.fd import FiniteDifferences

    fn = call.wrapped(outputs)
    names = call.names

    def traced(values):
        return fn(*[values[n] for n in names]), []

    values = {n: t.detach() for n, t in zip(names, call.tensors(), strict=True)}
    return FiniteDifferences(traced, values, eps=clamped(eps), elementwise=set(), dtype=dtype)


def _tolerance(options: dict[str, Any]) -> tuple[float, float]:
    from gradscope.verdict.tolerance import Tolerance

    tol = Tolerance.for_dtype(options["dtype"], options.get("rtol"), options.get("atol"))
    return tol.atol, tol.rtol


def _zero_jacobian(call: GradcheckCall, eps: float, atol: float) -> str | None:
    """No output is differentiable: gradcheck asserts the numerical Jacobian is zero."""
    if not call.float_outputs:
        return None
    fd = _differences(call, call.float_outputs, torch.float64, eps)
    names = call.names
    for name in names:
        est = fd.estimate(name)
        moving = est.partial.abs() > atol + 3 * est.error
        if bool(moving.any()):
            return (f"gradscope: gradcheck failed: no output requires grad, but the numerical "
                    f"Jacobian for {name} is not zero at {int(moving.sum())} entries (the "
                    "output moves with it): is a differentiable path cut (.detach(), "
                    "torch.no_grad, an integer cast)?")
    return None


def _plumbing(func: Callable[..., Any], inputs: Any, call: GradcheckCall,
              kw: dict[str, Any]) -> None:
    """torch's own checks of autograd plumbing, in fast mode, when asked for (undefined
    grads only matter where a custom Function's backward receives them)."""
    extra = {k: kw[k] for k in ("check_batched_grad", "check_batched_forward_grad",
                                "check_forward_ad", "check_grad_dtypes")}
    undefined = kw["check_undefined_grad"] and _custom_functions(call)
    if not any(extra.values()) and not undefined and not kw["masked"]:
        return
    try:
        TORCH_GRADCHECK(
            func, inputs, eps=kw["eps"], atol=kw["atol"], rtol=kw["rtol"],
            nondet_tol=kw["nondet_tol"], check_undefined_grad=undefined,
            check_backward_ad=kw["check_backward_ad"], fast_mode=True, masked=kw["masked"],
            raise_exception=True, **extra)
    except _torch_gradcheck.GradcheckError as exc:
        raise GradcheckError(f"gradscope: gradscope's check passed, but torch's plumbing check "
                             f"failed: {exc}") from exc


def _custom_functions(call: GradcheckCall) -> bool:
    """Whether the graph of func holds a custom autograd.Function (its backward is the
    user's, so undefined grads are the user's to handle)."""
    if not call.outputs:
        return False
    leaves = [t.detach().requires_grad_(True) for t in call.tensors()]
    out = call.wrapped()(*leaves)
    return any(getattr(node, "_forward_cls", None) is not None
               for node in grad_nodes(out.grad_fn))


def gradcheck(func: Callable[..., torch.Tensor | Sequence[torch.Tensor]],
              inputs: torch.Tensor | Sequence[torch.Tensor], *, eps: float = 1e-06,
              atol: float = 1e-05, rtol: float = 0.001, raise_exception: bool = True,
              nondet_tol: float = 0.0, check_undefined_grad: bool = True,
              check_grad_dtypes: bool = False, check_batched_grad: bool = False,
              check_batched_forward_grad: bool = False, check_forward_ad: bool = False,
              check_backward_ad: bool = True, fast_mode: bool = False,
              masked: bool | None = None) -> bool:
    """torch.autograd.gradcheck's signature and semantics, gradscope's check (module doc):
    True, or GradcheckError (raise_exception) / False."""
    kw = dict(locals())  # (first: the call's own arguments only)
    __tracebackhide__ = True  # pytest shows the test's line, not gradscope's frames
    STATS.called()
    try:
        call = GradcheckCall.of(func, inputs)
        if call.complex:
            return _torch_decides(kw, "complex inputs or outputs")
        if check_backward_ad:
            _backward(call, kw)
        _plumbing(func, inputs, call, kw)
    except GradcheckError:
        STATS.failing()
        if raise_exception:
            raise
        return False
    except TargetError as exc:  # func itself raised: torch's gradcheck lets that through too
        raise (exc.__cause__ or exc) from None
    except UsageError as exc:  # a call torch accepts and gradscope cannot check (zero-element
        # or sparse inputs, NaN inputs, a random func, nondet_tol=inf): torch's answer, said
        return _torch_decides(kw, str(exc).splitlines()[0])
    STATS.passed += 1
    return True


def _torch_decides(kw: dict[str, Any], why: str) -> bool:
    """torch's own gradcheck on the call, counted apart: the drop-in never refuses a call
    torch accepts, and never answers differently from it where gradscope cannot check."""
    args = {k: v for k, v in kw.items() if k not in ("func", "inputs")}
    STATS.delegated += 1
    STATS.reasons[why[:120]] = STATS.reasons.get(why[:120], 0) + 1
    return TORCH_GRADCHECK(kw["func"], kw["inputs"], **args)


def _backward(call: GradcheckCall, kw: dict[str, Any]) -> None:
    __tracebackhide__ = True
    options = _options(call, kw["eps"], kw["atol"], kw["rtol"], kw["nondet_tol"])
    if not call.outputs:
        problem = _zero_jacobian(call, options.get("eps", DEFAULT_EPS), _tolerance(options)[0])
        if problem:
            raise GradcheckError(problem)
        return
    if kw["fast_mode"]:
        atol, rtol = _tolerance(options)
        if _fast_agrees(call, options, atol, rtol):
            return
    report = _full(call, options)  # the per-element check, or the drill-down of fast mode
    problem = drop_in_failure(report, as_called(kw, options), STRICT)
    if problem:
        raise GradcheckError(problem, report)


def gradgradcheck(func: Callable[..., torch.Tensor | Sequence[torch.Tensor]],
                  inputs: torch.Tensor | Sequence[torch.Tensor],
                  grad_outputs: torch.Tensor | Sequence[torch.Tensor | None] | None = None, *,
                  eps: float = 1e-06, atol: float = 1e-05, rtol: float = 0.001,
                  gen_non_contig_grad_outputs: bool = False, raise_exception: bool = True,
                  nondet_tol: float = 0.0, check_undefined_grad: bool = True,
                  check_grad_dtypes: bool = False, check_batched_grad: bool = False,
                  check_fwd_over_rev: bool = False, check_rev_over_rev: bool = True,
                  fast_mode: bool = False, masked: bool = False) -> bool:
    """torch.autograd.gradgradcheck's signature and semantics: gradcheck of the function
    (inputs, grad_outputs) ↦ the VJP of func, with create_graph=True. Missing grad_outputs are
    seeded random tensors that require grad (checked too, as torch does)."""
    __tracebackhide__ = True  # pytest shows the test's line, not gradscope's frames
    args = tuple(inputs) if isinstance(inputs, tuple | list) else (inputs,)
    call = GradcheckCall.of(func, args)
    outs = call.wrapped_outputs()
    if grad_outputs is None:
        gen = torch.Generator().manual_seed(FAST_SEED)
        grad_outputs = tuple(torch.randn(o.shape, generator=gen, dtype=torch.float64)
                             .to(o).requires_grad_(True) for o in outs)
    gos = tuple(grad_outputs) if isinstance(grad_outputs, tuple | list) else (grad_outputs,)
    n_args = len(args)

    def first_order(*everything: Any) -> tuple[torch.Tensor, ...]:
        xs, vs = list(everything[:n_args]), everything[n_args:]
        with torch.enable_grad():  # finite differences evaluate without a graph
            for i in call.checked:  # (perturbed copies need to be leaves of this one)
                if not xs[i].requires_grad:
                    xs[i] = xs[i].detach().requires_grad_(True)
            result = call.func(*xs)
            results = [result] if isinstance(result, torch.Tensor) else list(result)
            picked = [results[k] for k in call.outputs]
            diff_in = [xs[i] for i in call.checked]
            grads = torch.autograd.grad(picked, diff_in, list(vs), create_graph=True,
                                        allow_unused=True)
        return tuple(g if g is not None else torch.zeros_like(x)
                     for g, x in zip(grads, diff_in, strict=True))

    first_order.__name__ = f"vjp_of_{getattr(func, '__name__', 'func')}"
    if not check_rev_over_rev and not check_fwd_over_rev:
        return True
    return gradcheck(first_order, (*args, *gos), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     check_forward_ad=check_fwd_over_rev, check_backward_ad=check_rev_over_rev,
                     fast_mode=fast_mode, masked=masked)

