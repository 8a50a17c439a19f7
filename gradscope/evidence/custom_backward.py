"""Checks of a hand-written backward, each with its own diagnostic kind and a message that says
what to change (the way torch's gradcheck names its failures, but pointing at elements):

* `backward_arity` / `backward_shape`: torch refused what backward returned;
* `nonlinear_backward`: backward(αv + βw) ≠ α·backward(v) + β·backward(w) — typically a constant
  written where `grad_output` belonged, which an all-ones upstream hides;
* `nondeterministic_backward`: two backward calls on the same upstream differ — whichever of
  gradscope's calls it is (the table's, the gradient-flow trace's, a probe's asked again, a
  fresh run of this check's own): a backward that reads a stale cache or a reused workspace
  is wrong on some calls only;
* `inplace_backward`: backward changed `grad_output` in place.

(Surrogate gradients are found by behaviour, for any code: explain/surrogates.py.)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from gradscope.compare.tolerance import Tolerance
from gradscope.engines.autograd import AutogradEngine
from gradscope.report.build import MAX_INDICES, mask_indices
from gradscope.report.model import Diagnostic
from gradscope.rng import generator
from gradscope.tensors import differing, multi_index

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
    unregistered = re.search(r"backward through (\S+?)(?:\.default)? but no autograd formula",
                             text)
    if unregistered:
        op = unregistered.group(1).replace(".", "::", 1)
        return Diagnostic(
            kind="autograd_registration", op=op, where=target, inputs=[], count=1,
            message=(f"custom op {op} has no autograd formula, so no gradient flows through "
                     f"it: backward raises ({first})"),
            hint=("register one with torch.library.register_autograd (or the op's "
                  "register_autograd); torch.library.opcheck's test_autograd_registration "
                  "checks that it covers every tensor input"))
    if "invalid gradient at index" in text:
        return Diagnostic(
            kind="backward_shape", op="backward", where=target, inputs=[], count=1,
            message=f"backward returned a gradient of the wrong shape or dtype: {first}",
            hint="each gradient must have the shape and dtype of its forward input")
    return None


@dataclass(frozen=True)
class CallsApart:
    """Two backward calls with one upstream whose answers differ: which calls (`first`,
    `again`, as a reader names them) and, per input, the differing elements (flat indices)
    with |again − first| there (infinite where one is NaN and the other is not)."""

    first: str
    again: str
    where: Mapping[str, tuple[torch.Tensor, torch.Tensor]]

    @classmethod
    def of(cls, first: str, again: str, before: Mapping[str, torch.Tensor],
           after: Mapping[str, torch.Tensor | None]) -> CallsApart | None:
        """The two answers compared (None: the same, element for element)."""
        where = {}
        for name, g in before.items():
            if name not in after:
                continue
            at, gap = differing(g, after[name])
            if at.numel():
                where[name] = (at, gap)
        return cls(first, again, where) if where else None

    def beyond(self, tolerance: float) -> dict[str, torch.Tensor]:
        """Per input, the flat indices where the two differ by more than `tolerance`."""
        out = {}
        for name, (at, gap) in self.where.items():
            kept = at[gap > tolerance]
            if kept.numel():
                out[name] = kept
        return out


def asked_again(ask: Callable[[torch.Tensor], Mapping[str, torch.Tensor]],
                asked: Sequence[tuple[str, torch.Tensor, Mapping[str, torch.Tensor]]],
                again: str) -> tuple[list[dict[str, torch.Tensor]], list[CallsApart]]:
    """Each (label, upstream, answer) asked once more (`ask`): the new answers, and the pairs
    that differ — a probe whose answers broke a relation they must keep may have met a
    backward that depends on the call, and the same question asked twice tells which."""
    answers, apart = [], []
    for label, upstream, first in asked:
        got = dict(ask(upstream))
        answers.append(got)
        found = CallsApart.of(label, again, first, got)
        if found is not None:
            apart.append(found)
    return answers, apart


def _random(shape: torch.Size, like: torch.Tensor, seed: int, label: str) -> torch.Tensor:
    return torch.randn(shape, generator=generator(seed, label), dtype=torch.float64).to(
        like.device, like.dtype)


def linearity(autograd: AutogradEngine, tol: Tolerance, seed: int, target: str,
              first: tuple[torch.Tensor, Mapping[str, torch.Tensor]] | None = None,
              known: Sequence[tuple[torch.Tensor, Mapping[str, torch.Tensor]]] = ()
              ) -> tuple[Diagnostic | None, dict[str, torch.Tensor], list[CallsApart],
                         list[tuple[torch.Tensor, Mapping[str, torch.Tensor]]]]:
    """Compare backward(αv + βw) with α·backward(v) + β·backward(w), per element; with the
    probe's questions (each upstream it used and backward's answer), for the evidence to judge
    (features/backwards.py). `known`: upstreams whose VJPs were asked and compared already
    (the random upstreams' views): two of them are v and w, and only the combination is
    asked. For a scalar output with `first`
    (an upstream u ≠ 0 and its VJP) linearity is homogeneity: backward(αv + βw) against
    (αv + βw)/u · backward(u), one backward instead of three (a model's gradient is a copy of
    the model: three at once are three copies).
    Where the answers break the relation (a NaN included, where the first backward gave
    numbers), every VJP this check asked is asked once more: a backward that answers the same
    upstream differently is said so (the pairs returned), and is called nonlinear only where
    its repeated answers still break the relation."""
    out = autograd.output
    (v, gv), (w, gw), own = _pair(out, seed, known)
    mixed = ALPHA * v + BETA * w
    asked = [("the linearity check's backward(αv + βw)", mixed, autograd.vjp(mixed))]
    scalar = out.numel() == 1 and first is not None and float(first[0]) != 0.0
    if scalar:
        own = []
    else:
        asked += [(label, u, autograd.vjp(u)) for label, u in own]
    table = first[1] if first is not None else {}

    def masks_of(answers: Sequence[Mapping[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        combined = answers[0]
        if scalar:
            assert first is not None
            ratio = float(mixed) / float(first[0])
            terms = {n: [(ratio, first[1][n])] for n in combined}
        else:
            pv, pw = (answers[1], answers[2]) if own else (gv, gw)
            terms = {n: [(ALPHA, pv[n]), (BETA, pw[n])] for n in combined}
        masks = {n: _departed(g, terms[n], tol, table.get(n)) for n, g in combined.items()}
        return {n: m for n, m in masks.items() if bool(m.any())}

    bad = masks_of([a for _, _, a in asked])
    apart: list[CallsApart] = []
    if bad:
        again, apart = asked_again(autograd.vjp, asked, "the same upstream asked again")
        if apart:
            bad = masks_of(again)
    question = [(u, answer) for _, u, answer in asked] + [  # (and the views' v and w)
        (u, answer) for u, answer in ((v, gv), (w, gw)) if answer is not None]
    if not bad:  # (masks of nothing are not kept: at a model's size each is a byte a parameter)
        return None, {}, apart, question
    count = sum(int(m.sum()) for m in bad.values())
    return Diagnostic(
        kind="nonlinear_backward", op="backward", where=target, inputs=sorted(bad), count=count,
        message=(f"backward is not linear in grad_output at {count} element(s): "
                 f"backward({ALPHA}·v {BETA:+}·w) ≠ {ALPHA}·backward(v) {BETA:+}·backward(w) "
                 "for random v, w. A constant (or a function of the input alone) was written "
                 "where a multiple of grad_output belonged; an all-ones upstream hides this"),
        hint=("every returned gradient must be grad_output times something: e.g. write "
              "`grad_input[x > 1] = 0`, not `= 1`"),
        indices={n: mask_indices(m) for n, m in bad.items()}), bad, apart, question


def _pair(out: torch.Tensor, seed: int,
          known: Sequence[tuple[torch.Tensor, Mapping[str, torch.Tensor]]]) -> tuple[Any, Any,
                                                                                    list]:
    """v and w with their VJPs where two were compared already (`known`), else seeded random
    ones whose VJPs the check asks itself (`own`: label and upstream of each)."""
    if len(known) >= 2:
        (v, gv), (w, gw) = known[0], known[1]
        return (v.to(out.dtype), gv), (w.to(out.dtype), gw), []
    v = _random(out.shape, out, seed, ":linearity-v")
    w = _random(out.shape, out, seed, ":linearity-w")
    return (v, None), (w, None), [("the linearity check's backward(v)", v),
                                  ("its backward(w)", w)]


def _departed(g: torch.Tensor, terms: list[tuple[float, torch.Tensor]], tol: Tolerance,
              defined: torch.Tensor | None = None) -> torch.Tensor:
    """Where |g − want| > atol + 4·rtol·|want| (atol scaled in half precision), with
    want = Σ coefficient·tensor in float64, a block of elements at a time: at a model's size
    each float64 temporary of a whole tensor (an embedding) is a gigabyte. A NaN or infinite
    difference departs where `defined` (the first backward's gradient) is finite — there the
    backward gave numbers once — and nowhere else."""
    flat = g.reshape(-1)
    known = defined.reshape(-1) if defined is not None and defined.shape == g.shape else None
    out = torch.empty(flat.shape, dtype=torch.bool, device=g.device)
    # (half precision: atol follows the largest wanted element)
    atol = tol.atol_for(_wanted(terms, slice(None))) if tol.scaled else tol.atol
    for start in range(0, flat.numel(), BLOCK):
        part = slice(start, start + BLOCK)
        want = _wanted(terms, part)
        diff = torch.sub(flat[part].to(torch.float64), want).abs_()
        bound = want.abs_().mul_(tol.rtol * 4).add_(atol)
        torch.gt(diff, bound, out=out[part])
        nonfinite = ~torch.isfinite(diff)
        out[part].logical_and_(~nonfinite)
        if known is not None and bool(nonfinite.any()):
            out[part].logical_or_(nonfinite & torch.isfinite(known[part]))
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
                target: str, tolerance: float = 0.0, repeated: bool = False,
                apart: Sequence[CallsApart] = (), tol: Tolerance | None = None
                ) -> Diagnostic | None:
    """Every two backward calls with one upstream must agree (within `tolerance`, gradcheck's
    nondet_tol: atomics in a CUDA kernel may reorder a sum) — `apart`: the pairs other checks
    asked and found differing (the gradient-flow trace's run beside the first, a probe asked
    again). One more comes from a fresh forward: replaying the first graph tests torch's
    bookkeeping, and breaks a Function that frees what it saved after one backward.
    `repeated`: such a second run was made already (the gradient-flow trace's) and agreed bit
    for bit — no third is needed. A backward wrong on one call only fails whichever call it
    is: the pairs are judged alike."""
    pairs = list(apart)
    if not repeated:
        again = autograd.fresh_vjp(upstream.clone())  # (backward may write into its upstream)
        found = CallsApart.of("the first backward", "a fresh forward and backward", first,
                              again)
        if found is not None:
            pairs.append(found)
    beyond = [(pair, pair.beyond(tolerance)) for pair in pairs]
    beyond = [(pair, where) for pair, where in beyond if where]
    if not beyond:
        return None
    bad: dict[str, torch.Tensor] = {}
    for _, where in beyond:
        for name, at in where.items():
            bad[name] = torch.cat([bad[name], at]).unique() if name in bad else at
    count = sum(int(at.numel()) for at in bad.values())
    calls = "; ".join(f"{pair.first} and {pair.again}" for pair, _ in beyond[:3])
    worst = _worst(beyond, first, tol) if tol is not None else None
    said = f"two backward calls with the same upstream differ at {count} element(s) ({calls})"
    if worst is None or worst > 1:
        kind, hint = "nondeterministic_backward", (
            "backward must not depend on random numbers, on the call, or on state it changes "
            "(a cache or workspace reused from an earlier call)")
    else:
        kind, hint = REPEATABILITY, ("where it is expected, accept it as gradcheck does: "
                                     "--nondet-tol (beyond it, --fail-on warning fails it)")
        said += (f", by at most {worst:.2g} of the comparison's tolerance: both answers agree "
                 "with the references at it, so this is a warning (atomics reordering a sum, "
                 "an iterative solve), not a failure")
    return Diagnostic(kind=kind, op="backward", where=target, inputs=sorted(bad), count=count,
                      message=said, hint=hint,
                      indices={n: _unravel(at, first[n].shape) for n, at in bad.items()})


REPEATABILITY = "nondeterministic_within_tolerance"


def _worst(beyond: Sequence[tuple[CallsApart, Mapping[str, torch.Tensor]]],
           first: Mapping[str, torch.Tensor], tol: Tolerance) -> float:
    """The largest gap between two calls' answers beside the comparison's bound there
    (atol + rtol·|first answer|): at most 1, both agree with a reference the first agrees
    with, at the resolution the evidence is judged at."""
    worst = 0.0
    for pair, _ in beyond:
        for name, (at, gap) in pair.where.items():
            g = first[name].reshape(-1)[at.to(first[name].device)].detach().double().abs()
            bound = g.mul(tol.rtol).add(tol.atol_for(first[name])).to(gap.device)
            worst = max(worst, float((gap / bound).max()) if gap.numel() else 0.0)
    return worst


def _unravel(at: torch.Tensor, shape: torch.Size) -> list[list[int]]:
    """Flat indices as the report's index lists (the first few, in order)."""
    return [multi_index(int(i), tuple(shape)) for i in at.sort().values[:MAX_INDICES]]


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
                    seed: int, nondet_tol: float = 0.0, repeated: bool = False,
                    apart: Sequence[CallsApart] = (),
                    known: Sequence[tuple[torch.Tensor, Mapping[str, torch.Tensor]]] = ()
                    ) -> tuple[tuple[Diagnostic, ...], dict[str, torch.Tensor],
                               list[tuple[torch.Tensor, Mapping[str, torch.Tensor]]]]:
    """Linearity, determinism and in-place checks of a user's backward (`upstream` as given,
    `after`: the copy backward received; `apart`: pairs of calls found differing already;
    `known`: upstreams whose VJPs were compared already): the diagnostics of those that
    failed, per input where backward is not linear (such elements are never excused as
    surrogates), and the linearity probe's own questions (each upstream and backward's answer)."""
    diagnostics = []
    mutated = inplace(upstream, after, text)
    if mutated:
        diagnostics.append(mutated)
    nonlinear, masks, again, asked = linearity(autograd, tol, seed, text, (upstream, grads),
                                               known)
    nondeterministic = determinism(autograd, upstream, grads, text, nondet_tol, repeated,
                                   [*apart, *again], tol)
    if nondeterministic:
        diagnostics.append(nondeterministic)
    if nonlinear:
        diagnostics.append(nonlinear)
    return tuple(diagnostics), masks, asked
