"""Checks of a hand-written backward, each with its own diagnostic kind and a message that says
what to change (the way torch's gradcheck names its failures, but pointing at elements):

* `backward_arity` / `backward_shape`: torch refused what backward returned;
* `nonlinear_backward`: backward(αv + βw) ≠ α·backward(v) + β·backward(w) — typically a constant
  written where `grad_output` belonged, which an all-ones upstream hides;
* `nondeterministic_backward`: two backward calls on the same upstream differ;
* `inplace_backward`: backward changed `grad_output` in place.

(Surrogate gradients are found by behaviour, for any code: diagnose/surrogates.py.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import torch

from gradscope.engines.autograd import AutogradEngine
from gradscope.report.build import mask_indices
from gradscope.report.model import Diagnostic
from gradscope.rng import generator
from gradscope.verdict.tolerance import Tolerance

ALPHA, BETA = 0.75, -1.25
# elements compared at a time: float64 temporaries of 16 MB, below glibc's largest mmap
# threshold (32 MB), so each block reuses the last one's pages
BLOCK = 1 << 21


def classify_failure(exc: BaseException, target: str,
                     backwards: Mapping[str, str] | None = None) -> Diagnostic | None:
    """A diagnostic for torch's own complaints about what backward returned, else None.
    `backwards`: each custom Function's node name (`FewBackward`) → its backward's label
    (`Few.backward (few.py:7)`), so that the message names the one torch named."""
    text = str(exc)
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    named = re.search(r"function (\w+) returned", text)
    who = (backwards or {}).get(named.group(1), "") if named else ""
    arity = re.search(r"incorrect number of gradients \(expected (\d+), got (\d+)\)", text)
    if arity:
        expected, got = arity.groups()
        return Diagnostic(
            kind="backward_arity", op="backward", where=target, inputs=[], count=1,
            message=f"{who or 'backward'} returned {got} gradient(s) but forward took "
                    f"{expected} input(s)",
            hint=("return one gradient per forward input, in order, with None for non-tensor "
                  "inputs (e.g. `return grad_u, grad_v` or `return grad_input, None`)"))
    if "different than None" in text or "not a Variable" in text \
            or "forward input was not" in text:
        return Diagnostic(
            kind="backward_arity", op="backward", where=target, inputs=[], count=1,
            message=f"backward returned a tensor for an input that is not a tensor: {first}",
            hint="return None in the position of every non-tensor forward argument")
    if "invalid gradient at index" in text:
        return Diagnostic(
            kind="backward_shape", op="backward", where=target, inputs=[], count=1,
            message=f"backward returned a gradient of the wrong shape or dtype: {first}",
            hint="each gradient must have the shape and dtype of its forward input")
    return None


def _random(shape: torch.Size, like: torch.Tensor, seed: int, label: str) -> torch.Tensor:
    return torch.randn(shape, generator=generator(seed, label), dtype=torch.float64).to(
        like.device, like.dtype)


def linearity(autograd: AutogradEngine, tol: Tolerance, seed: int, target: str,
              first: tuple[torch.Tensor, Mapping[str, torch.Tensor]] | None = None
              ) -> tuple[Diagnostic | None, dict[str, torch.Tensor]]:
    """Compare backward(αv + βw) with α·backward(v) + β·backward(w), per element. For a
    scalar output with `first` (an upstream u ≠ 0 and its VJP) linearity is homogeneity:
    backward(αv + βw) against (αv + βw)/u · backward(u), one backward instead of three (a
    model's gradient is a copy of the model: three at once are three copies)."""
    out = autograd.output
    v = _random(out.shape, out, seed, ":linearity-v")
    w = _random(out.shape, out, seed, ":linearity-w")
    combined = autograd.vjp(ALPHA * v + BETA * w)
    if out.numel() == 1 and first is not None and float(first[0]) != 0.0:
        ratio = float(ALPHA * v + BETA * w) / float(first[0])

        def wanted(name: str) -> list[tuple[float, torch.Tensor]]:
            return [(ratio, first[1][name])]
    else:
        gv, gw = autograd.vjp(v), autograd.vjp(w)

        def wanted(name: str) -> list[tuple[float, torch.Tensor]]:
            return [(ALPHA, gv[name]), (BETA, gw[name])]
    masks = {name: _departed(g, wanted(name), tol) for name, g in combined.items()}
    bad = {n: m for n, m in masks.items() if bool(m.any())}
    if not bad:  # (masks of nothing are not kept: at a model's size each is a byte a parameter)
        return None, {}
    count = sum(int(m.sum()) for m in bad.values())
    return Diagnostic(
        kind="nonlinear_backward", op="backward", where=target, inputs=sorted(bad), count=count,
        message=(f"backward is not linear in grad_output at {count} element(s): "
                 f"backward({ALPHA}·v {BETA:+}·w) ≠ {ALPHA}·backward(v) {BETA:+}·backward(w) "
                 "for random v, w. A constant (or a function of the input alone) was written "
                 "where a multiple of grad_output belonged; an all-ones upstream hides this"),
        hint=("every returned gradient must be grad_output times something: e.g. write "
              "`grad_input[x > 1] = 0`, not `= 1`"),
        indices={n: mask_indices(m) for n, m in bad.items()}), bad


def _departed(g: torch.Tensor, terms: list[tuple[float, torch.Tensor]], tol: Tolerance
              ) -> torch.Tensor:
    """Where |g − want| > atol + 4·rtol·|want|, finite (atol scaled in half precision), with
    want = Σ coefficient·tensor in float64, a block of elements at a time: at a model's size
    each float64 temporary of a whole tensor (an embedding) is a gigabyte."""
    flat = g.reshape(-1)
    out = torch.empty(flat.shape, dtype=torch.bool, device=g.device)
    # (half precision: atol follows the largest wanted element)
    atol = tol.atol_for(_wanted(terms, slice(None))) if tol.scaled else tol.atol
    for start in range(0, flat.numel(), BLOCK):
        part = slice(start, start + BLOCK)
        want = _wanted(terms, part)
        diff = torch.sub(flat[part].to(torch.float64), want).abs_()
        bound = want.abs_().mul_(tol.rtol * 4).add_(atol)
        torch.gt(diff, bound, out=out[part])
        out[part].logical_and_(torch.isfinite(diff))
    return out.reshape(g.shape)


def _wanted(terms: list[tuple[float, torch.Tensor]], part: slice) -> torch.Tensor:
    """Σ coefficient·tensor over the flat elements `part`, in float64."""
    total = None
    for coefficient, tensor in terms:
        term = tensor.reshape(-1)[part].to(torch.float64) * coefficient
        total = term if total is None else total.add_(term)
    assert total is not None
    return total


def determinism(autograd: AutogradEngine, upstream: torch.Tensor, first: Mapping[str, torch.Tensor],
                target: str, tolerance: float = 0.0, repeated: bool = False
                ) -> Diagnostic | None:
    """Two backward calls with one upstream must agree (within `tolerance`, gradcheck's
    nondet_tol: atomics in a CUDA kernel may reorder a sum). The second comes from a fresh
    forward: replaying the first graph tests torch's bookkeeping, and breaks a Function that
    frees what it saved after one backward. `repeated`: such a second run was made already
    (the gradient-flow trace's) and agreed bit for bit — the check passes without a third
    (any disagreement there is judged here, by a run of this check's own)."""
    if repeated:
        return None
    again = autograd.fresh_vjp(upstream.clone())  # (backward may write into what it is given)
    # (equal tensors, the usual case, are one pass without a temporary the size of a model)
    bad = {n: ~(((g - first[n]).abs() <= tolerance) | (torch.isnan(g) & torch.isnan(first[n])))
           for n, g in again.items() if not torch.equal(g, first[n])}
    bad = {n: m for n, m in bad.items() if bool(m.any())}
    if not bad:
        return None
    count = sum(int(m.sum()) for m in bad.values())
    return Diagnostic(
        kind="nondeterministic_backward", op="backward", where=target, inputs=sorted(bad),
        count=count, message=f"two backward calls with the same upstream differ at {count} "
                             "element(s)",
        hint="backward must not depend on random numbers or on state it changes",
        indices={n: mask_indices(m) for n, m in bad.items()})


def inplace(before: torch.Tensor, after: torch.Tensor, target: str) -> Diagnostic | None:
    changed = ~((before == after) | (torch.isnan(before) & torch.isnan(after)))
    if not bool(changed.any()):
        return None
    return Diagnostic(
        kind="inplace_backward", op="backward", where=target, inputs=[],
        count=int(changed.sum()),
        message="backward changed grad_output in place (the upstream gradient was modified)",
        hint="clone grad_output before changing it: `grad_input = grad_output.clone()`",
        indices={"upstream": mask_indices(changed)})


def backward_checks(text: str, autograd: AutogradEngine, upstream: torch.Tensor,
                    after: torch.Tensor, grads: Mapping[str, torch.Tensor], tol: Tolerance,
                    seed: int, nondet_tol: float = 0.0, repeated: bool = False
                    ) -> tuple[tuple[Diagnostic, ...], dict[str, torch.Tensor]]:
    """Linearity, determinism and in-place checks of a user's backward (`upstream` as given,
    `after`: the copy backward received): the diagnostics of those that failed, and per input
    where backward is not linear (such elements are never excused as surrogates)."""
    diagnostics = []
    mutated = inplace(upstream, after, text)
    if mutated:
        diagnostics.append(mutated)
    nondeterministic = determinism(autograd, upstream, grads, text, nondet_tol, repeated)
    if nondeterministic:
        diagnostics.append(nondeterministic)
    nonlinear, masks = linearity(autograd, tol, seed, text, (upstream, grads))
    if nonlinear:
        diagnostics.append(nonlinear)
    return tuple(diagnostics), masks
