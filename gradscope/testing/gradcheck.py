"""A drop-in for `torch.autograd.gradcheck` / `gradgradcheck`: torch's signatures and defaults,
gradscope's checks and explanations.

    from gradscope import gradcheck            # instead of: from torch.autograd import gradcheck
    assert gradcheck(fn, (x, weight, index))   # True, or raises gradscope.GradcheckError

Every call torch's gradcheck accepts is accepted, with the same meaning. What is checked and
how the inputs reach `func` is testing/call.py's (zero-element tensors: nothing to compare, a
pass counted apart; views keep their layout); how the Jacobian is judged is
testing/judging.py's (gradscope's own tight check, the call's tolerances deciding unless
strict); the plumbing checks (`check_undefined_grad`, `check_batched_grad`,
`check_grad_dtypes`, backward multiplied by grad_output) are testing/plumbing.py's, done with
public autograd calls. Forward-mode checks (`check_forward_ad`, `check_batched_forward_grad`)
and `masked` are run by torch's own gradcheck when asked for; complex inputs or outputs, sparse
inputs and other calls gradscope cannot check go to torch's gradcheck whole, counted apart.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gradscope.errors import TargetError, UsageError
from gradscope.tensors import as_given, once_differentiable_in
from gradscope.testing import plumbing
from gradscope.testing.call import GradcheckCall
from gradscope.testing.judging import (
    FAST_SEED,
    TORCH_GRADCHECK,
    GradcheckError,
    GradscopeWarning,
    backward,
    strict_mode,
    torch_gradcheck,
)
from gradscope.testing.stats import STATS

_torch_gradcheck = sys.modules["torch.autograd.gradcheck"]
# (torch's gradgradcheck, kept before any switch replaces it; its gradcheck: judging.py)
TORCH_GRADGRADCHECK = _torch_gradcheck.gradgradcheck
__all__ = ["GradcheckError", "GradscopeWarning", "gradcheck", "gradgradcheck"]


def _plumbing(call: GradcheckCall, kw: dict[str, Any]) -> None:
    """The plumbing checks asked for (module doc): natively, forward mode by torch."""
    __tracebackhide__ = True
    if kw["check_backward_ad"] and call.outputs:
        problem = plumbing.checks(call, batched=kw["check_batched_grad"],
                                  undefined=kw["check_undefined_grad"],
                                  dtypes=kw["check_grad_dtypes"])
        if problem:
            raise GradcheckError(f"gradscope: gradcheck failed: {problem}")
    forward = {k: kw[k] for k in ("check_forward_ad", "check_batched_forward_grad")}
    if not any(forward.values()) and not kw["masked"]:
        return
    try:
        TORCH_GRADCHECK(
            kw["func"], kw["inputs"], eps=kw["eps"], atol=kw["atol"], rtol=kw["rtol"],
            nondet_tol=kw["nondet_tol"], check_undefined_grad=kw["check_undefined_grad"],
            check_backward_ad=bool(kw["masked"]) and kw["check_backward_ad"], fast_mode=True,
            masked=kw["masked"], raise_exception=True, **forward)
    except _torch_gradcheck.GradcheckError as exc:
        raise GradcheckError(f"gradscope: gradscope's check passed, but torch's forward-mode "
                             f"check failed: {exc}") from exc


def gradcheck(func: Callable[..., torch.Tensor | Sequence[torch.Tensor]],
              inputs: torch.Tensor | Sequence[torch.Tensor], *, eps: float = 1e-06,
              atol: float = 1e-05, rtol: float = 0.001, raise_exception: bool = True,
              nondet_tol: float = 0.0, check_undefined_grad: bool = True,
              check_grad_dtypes: bool = False, check_batched_grad: bool = False,
              check_batched_forward_grad: bool = False, check_forward_ad: bool = False,
              check_backward_ad: bool = True, fast_mode: bool = False,
              masked: bool | None = None, strict: bool | None = None) -> bool:
    """torch.autograd.gradcheck's signature and semantics, gradscope's check (module doc):
    True, or GradcheckError (raise_exception) / False. `strict`: gradscope's own tolerances
    decide, not the call's (default: the pytest plugin's `--gradscope-strict`, else
    GRADSCOPE_STRICT)."""
    kw = dict(locals())  # (first: the call's own arguments only)
    __tracebackhide__ = True  # pytest shows the test's line, not gradscope's frames
    _refused_as_torch_would(kw)
    STATS.called()
    call = None
    try:
        call = GradcheckCall.of(func, inputs)
        if call.complex:
            return _torch_decides(kw, "complex inputs or outputs")
        if call.nothing_to_compare:
            STATS.nothing_to_compare(", ".join(call.empty))
            return True
        if call.reads_originals():
            return _torch_decides(kw, "func reads the checked tensors themselves, not only "
                                      "its arguments (a closure over them)")
        # (where torch's own gradcheck, as called, passed the call on the way, its plumbing
        # checks passed with it)
        if not (check_backward_ad and backward(call, kw, strict_mode(strict))):
            _plumbing(call, kw)
    except GradcheckError:
        STATS.failing(raising=raise_exception)
        if raise_exception:
            raise
        return False
    except TargetError as exc:  # func itself raised: torch's gradcheck lets that through too
        raise (exc.__cause__ or exc) from None
    except UsageError as exc:  # a call torch accepts and gradscope cannot check (sparse
        # inputs, NaN inputs, a random func, nondet_tol=inf): torch's answer, said
        return _torch_decides(kw, _why(str(exc).splitlines()[0], call))
    STATS.passed += 1
    return True


def _why(reason: str, call: GradcheckCall | None) -> str:
    """A hand-over's reason as it is: where func's first call (the caller's own tensors) had
    a differentiable output, "does not depend differentiably" would be gradscope's words about
    its own evaluation, not func's (a hollow hand-over) — said so instead."""
    if HOLLOW in reason and call is not None and call.outputs:
        return ("func's output had a graph at its first call and none at gradscope's next one "
                "(func changes between calls)")
    return reason


HOLLOW = "does not depend differentiably"


def _refused_as_torch_would(kw: dict[str, Any]) -> None:
    """The arguments torch's gradcheck refuses, refused the same way (its exception and
    words): nothing to check, a tolerance that is negative or NaN."""
    __tracebackhide__ = True
    if not (kw["check_forward_ad"] or kw["check_backward_ad"]):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad "
                             "to be True")
    for name in ("atol", "rtol"):
        if not kw[name] >= 0:  # (NaN too)
            raise RuntimeError(f"{name} must be greater than or equal to zero, but got "
                               f"{kw[name]}")


def _torch_decides(kw: dict[str, Any], why: str) -> bool:
    """torch's own gradcheck on the call, counted apart: the drop-in never refuses a call
    torch accepts, and never answers differently from it where gradscope cannot check."""
    STATS.decided_by_torch(why)
    return torch_gradcheck(kw)


def gradgradcheck(func: Callable[..., torch.Tensor | Sequence[torch.Tensor]],
                  inputs: torch.Tensor | Sequence[torch.Tensor],
                  grad_outputs: torch.Tensor | Sequence[torch.Tensor | None] | None = None, *,
                  eps: float = 1e-06, atol: float = 1e-05, rtol: float = 0.001,
                  gen_non_contig_grad_outputs: bool = False, raise_exception: bool = True,
                  nondet_tol: float = 0.0, check_undefined_grad: bool = True,
                  check_grad_dtypes: bool = False, check_batched_grad: bool = False,
                  check_fwd_over_rev: bool = False, check_rev_over_rev: bool = True,
                  fast_mode: bool = False, masked: bool = False,
                  strict: bool | None = None) -> bool:
    """torch.autograd.gradgradcheck's signature and semantics: gradcheck of the function
    (inputs, grad_outputs) ↦ the VJP of func, with create_graph=True. Missing grad_outputs are
    seeded random tensors that require grad (checked too, as torch does)."""
    __tracebackhide__ = True  # pytest shows the test's line, not gradscope's frames
    args = tuple(inputs) if isinstance(inputs, tuple | list) else (inputs,)
    call = GradcheckCall.of(func, args)
    outs = call.wrapped_outputs()
    once = [cls for o in outs for cls in once_differentiable_in(o)]
    if once and check_rev_over_rev:  # (torch's gradgradcheck fails these too)
        STATS.called()
        STATS.failing(raising=raise_exception)
        if raise_exception:
            raise GradcheckError(f"gradscope: gradgradcheck failed: {once[0].__name__}.backward "
                                 "is decorated with @once_differentiable, so torch cannot "
                                 "differentiate it a second time")
        return False
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
                    xs[i] = as_given(xs[i].detach().requires_grad_(True), args[i])
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
                     fast_mode=fast_mode, masked=masked, strict=strict)

