"""How a gradient is wrong, not only where: simple relations between autograd and its reference
(symbolic, else finite differences with their error bound) tested on the elements a comparison
judged, the first that holds named.

* `factor`: autograd = c × reference at every judged element (−1: a sign flip; 1/n or n for a
  dimension size n: a mean where a sum belonged, or the reverse);
* `zero`: autograd is 0 wherever it disagrees (a missing term, a detached path);
* `transposed` / `permuted`: autograd is the reference with its axes swapped;
* `swapped`: autograd of one input is the reference of another (return order);
* `additive`: autograd = reference + a constant (an extra term);
* `ignored`: the forward ignores the elements (at any value) yet autograd is not zero;
* `subset`: the disagreement lies in some indices of one dimension (a row, a head), possibly
  with a factor there;
* `surrogate` (diagnose/surrogates.py): a surrogate gradient that does not integrate to what
  the forward does at a coarse scale.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import torch

from gradscope.report.status import MISMATCH, OK
from gradscope.verdict.tolerance import FD_ERROR_FACTOR, Tolerance

MAX_PERMUTED_DIMS = 4  # axis permutations are tried up to this many dims (24 orders)
MAX_LISTED = 6  # indices named in a subset relation


@dataclass
class Arrays:
    """One input's comparison: autograd, its reference and the reference's error bound (None:
    exact), and the per-element status codes; all the input's shape (or a Jacobian's)."""

    autograd: torch.Tensor
    reference: torch.Tensor
    error: torch.Tensor | None
    status: torch.Tensor


@dataclass
class Relation:
    kind: str  # factor | zero | transposed | permuted | swapped | additive | subset
    text: str  # "autograd = −0.5 × the derivative"
    reading: str  # what it likely means
    covers: int  # elements the relation explains
    factor: float | None = None

    @property
    def message(self) -> str:
        return f"{self.text}{f': {self.reading}' if self.reading else ''}"


# what to look for, per relation (the `mismatch_pattern` diagnostic's hint)
HINTS = {
    "factor": "look for a constant in backward: a division by a size, a minus sign, a 2 of a "
              "square; if the scaling is deliberate, declare it with --surrogate NAME",
    "zero": "a path to this input is cut: a .detach(), torch.no_grad(), an in-place write or "
            "a zero returned by backward",
    "transposed": "check the .t()/.transpose in backward against the forward's layout",
    "permuted": "check the permute/transpose calls in backward against the forward's",
    "swapped": "return one gradient per forward input, in the forward's order",
    "additive": "backward adds a term the forward does not have",
    "ignored": "backward should give zero where the forward discards the input (as autograd "
               "of `result[:, :n] = 0` does)",
    "subset": "compare the branch of backward these elements take with the others'",
    "surrogate": "a surrogate must integrate to what the forward does at a coarse scale: check "
                 "its scale, its gate (hardtanh's |x| ≤ 1 for sign) and its sign; a surrogate "
                 "meant this way is declared with @gradscope.surrogate(reference=...) or "
                 "--surrogate NAME=EXPRESSION, and then compared with that reference",
}


def number(x: float) -> str:
    """A factor as people write it: −0.5, 0.25, 3 (a true minus sign)."""
    text = f"{x:.4g}"
    return text.replace("-", "\u2212")


def find(name: str, arrays: Arrays, tol: Tolerance, sizes: Mapping[str, int],
         others: Mapping[str, Arrays] | None = None,
         ignored: torch.Tensor | None = None) -> Relation | None:
    """The first relation that holds between autograd and the reference of `name`;
    `ignored` marks the elements the forward was found to ignore at every value tried."""
    judged = (arrays.status == OK) | (arrays.status == MISMATCH)
    wrong = arrays.status == MISMATCH
    if not bool(wrong.any()):
        return None
    if ignored is not None and ignored.shape == wrong.shape and bool(ignored[wrong].all()):
        n = int(wrong.sum())
        return Relation("ignored", f"the forward ignores {name} at {n} element(s) (its output "
                        "stays the same for any value tried there) yet autograd passes "
                        "gradient on", "backward misses that the forward discards these "
                        "elements (a zeroed slice, a masked or overwritten part)", n)
    ag, ref = arrays.autograd.double(), arrays.reference.double()
    err = arrays.error.double() if arrays.error is not None else torch.zeros_like(ref)
    total = int(judged.sum())
    for test in (_zero, _factor, _axes, _additive):
        rel = test(ag, ref, err, judged, wrong, tol, sizes)
        if rel is not None:
            return rel
    swapped = _swapped(name, ag, judged, tol, others or {})
    if swapped is not None:
        return swapped
    return _subset(ag, ref, err, judged, wrong, tol, sizes, total)


def _close(a: torch.Tensor, b: torch.Tensor, err: torch.Tensor, tol: Tolerance,
           scale: float = 1.0) -> torch.Tensor:
    limit = tol.atol + tol.rtol * torch.maximum(a.abs(), b.abs()) + FD_ERROR_FACTOR * scale * err
    return (a - b).abs() <= limit


def _zero(ag, ref, err, judged, wrong, tol, sizes) -> Relation | None:
    if not bool((ag[wrong].abs() <= tol.atol).all()):
        return None
    n = int(wrong.sum())
    everywhere = bool((ag[judged].abs() <= tol.atol).all())
    where = "at every element" if everywhere else f"at the {n} element(s) that disagree"
    return Relation("zero", f"autograd is 0 {where} while the derivative is not",
                    "a missing term or a detached path (.detach(), torch.no_grad, a zero or "
                    "None returned by backward)", n, 0.0)


def _factor(ag, ref, err, judged, wrong, tol, sizes) -> Relation | None:
    # A factor is read only where the reference is clearly not zero at every element that
    # disagrees: a ratio to a reference that is round-off says nothing.
    if not bool(_significant(ref, err, tol)[wrong].all()):
        return None
    # (a factor on the disagreeing part only is a `subset`, which says where)
    c = _fit(ag[judged], ref[judged])
    if c is None or abs(c - 1.0) <= tol.rtol:
        return None
    c = _snap(c, sizes)
    if not bool(_close(ag[judged], c * ref[judged], err[judged], tol, abs(c)).all()):
        return None
    n = int(judged.sum())
    if n == 1:
        return Relation("factor", f"autograd = {number(c)} × the derivative (one element: a "
                        "ratio, not a pattern)", _reading(c, sizes), 1, c)
    return Relation("factor", f"autograd = {number(c)} × the derivative at every element",
                    _reading(c, sizes), n, c)


def _significant(ref: torch.Tensor, err: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    return ref.abs() > 10 * (tol.atol + FD_ERROR_FACTOR * err)


def _fit(ag: torch.Tensor, ref: torch.Tensor) -> float | None:
    """Least-squares c in ag ≈ c·ref (None when the reference is zero)."""
    denom = float((ref * ref).sum())
    if denom == 0.0 or not math.isfinite(denom):
        return None
    c = float((ag * ref).sum()) / denom
    return c if math.isfinite(c) and c != 0.0 else None


def _snap(c: float, sizes: Mapping[str, int]) -> float:
    """c rounded to the simple number it almost is (1/4, −1, 3), where it almost is one."""
    candidates = [Fraction(c).limit_denominator(16)]
    candidates += [Fraction(sign, n) for n in set(sizes.values()) if n > 1 for sign in (1, -1)]
    candidates += [Fraction(sign * n) for n in set(sizes.values()) if n > 1 for sign in (1, -1)]
    for f in candidates:
        if f != 0 and abs(float(f) - c) <= 1e-6 * abs(c):
            return float(f)
    return c


def _reading(c: float, sizes: Mapping[str, int]) -> str:
    """What a factor usually means."""
    magnitude = abs(c)
    sign = c < 0
    if abs(magnitude - 1.0) < 1e-9:
        return "the sign is flipped (a minus too many or too few)"
    named = []
    for label, n in sizes.items():
        if n > 1 and abs(magnitude - 1.0 / n) < 1e-9 * n:
            named.append(f"1/{n}, {n} being {label}")
        elif n > 1 and abs(magnitude - n) < 1e-9 * n:
            named.append(f"{n}, {label}")
    if sign:
        return (f"the sign is flipped and the size scaled by {number(magnitude)}: what a "
                "gradient-reversal layer does on purpose (declare it with --surrogate)")
    parts = []
    if named:
        smaller = magnitude < 1
        parts.append(f"{number(magnitude)} = {named[0]}: "
                     + ("a mean where a sum belonged, or a division by the batch size?"
                        if smaller else "a sum where a mean belonged?"))
    elif abs(magnitude - 2.0) < 1e-9 or abs(magnitude - 0.5) < 1e-9:
        parts.append("a factor 2 missing or too many (the 2 of d(x²) = 2x, a ½ of a mean "
                     "of two?)")
    return "; ".join(parts)


def _axes(ag, ref, err, judged, wrong, tol, sizes) -> Relation | None:
    ndim = ag.ndim
    if ndim < 2 or ndim > MAX_PERMUTED_DIMS:
        return None
    for order in itertools.permutations(range(ndim)):
        if list(order) == list(range(ndim)):
            continue
        if tuple(ref.permute(order).shape) != tuple(ag.shape):
            continue
        moved = ref.permute(order)
        if bool(_close(ag, moved, err.permute(order), tol).all()):
            if ndim == 2:
                return Relation("transposed", "autograd is the derivative transposed",
                                "a .t() / .transpose too many or too few (e.g. grad @ w "
                                "where grad @ w.t() belonged)", int(judged.sum()))
            return Relation("permuted", f"autograd is the derivative with its axes in the "
                            f"order {tuple(order)}", "axes permuted or transposed in backward",
                            int(judged.sum()))
    return None


def _additive(ag, ref, err, judged, wrong, tol, sizes) -> Relation | None:
    diff = (ag - ref)[judged]
    if diff.numel() < 2:
        return None
    d = float(diff.median())
    if abs(d) <= tol.atol:
        return None
    if bool(_close(ag[judged], ref[judged] + d, err[judged], tol).all()):
        return Relation("additive", f"autograd = the derivative {'+' if d > 0 else '−'} "
                        f"{number(abs(d))} at every element",
                        "an extra term in backward (a gradient of something the forward "
                        "does not compute)", int(judged.sum()), None)
    return None


def _swapped(name: str, ag, judged, tol, others: Mapping[str, Arrays]) -> Relation | None:
    for other, arrays in others.items():
        if other == name or tuple(arrays.reference.shape) != tuple(ag.shape):
            continue
        ref = arrays.reference.double()
        err = arrays.error.double() if arrays.error is not None else torch.zeros_like(ref)
        if bool(_close(ag, ref, err, tol).all()):
            return Relation("swapped", f"autograd for {name} is the derivative for {other}",
                            "backward returns its gradients in the wrong order (one per "
                            "forward input, in order)", int(judged.sum()))
    return None


def _subset(ag, ref, err, judged, wrong, tol, sizes, total) -> Relation | None:
    """The disagreement confined to some indices of one dimension (rows, columns, heads)."""
    best: tuple[float, int, list[int]] | None = None
    for dim in range(wrong.ndim):
        size = wrong.shape[dim]
        if size < 2:
            continue
        other = tuple(d for d in range(wrong.ndim) if d != dim)
        hit = wrong.any(dim=other) if other else wrong
        picked = torch.nonzero(hit).reshape(-1).tolist()
        if len(picked) < size and (best is None or len(picked) / size < best[0]):
            best = (len(picked) / size, dim, picked)
    n_wrong = int(wrong.sum())
    strong = bool(_significant(ref, err, tol)[wrong].all())
    factor = _fit(ag[wrong], ref[wrong]) if strong and n_wrong > 1 else None
    factor_text = ""
    if factor is not None:
        c = _snap(factor, sizes)
        if abs(c - 1) > tol.rtol and bool(_close(ag[wrong], c * ref[wrong], err[wrong], tol,
                                             abs(c)).all()):
            factor_text = f"; there autograd = {number(c)} × the derivative"
    if best is None:
        if not factor_text:
            return None
        return Relation("subset", f"autograd agrees at {total - n_wrong} of {total} element(s)"
                        f"{factor_text}", "", n_wrong, factor)
    _, dim, picked = best
    listed = ", ".join(map(str, picked[:MAX_LISTED])) + (", …" if len(picked) > MAX_LISTED
                                                         else "")
    return Relation("subset", f"the disagreement lies in index {listed} of dim {dim} only "
                    f"({n_wrong} element(s)); autograd agrees elsewhere{factor_text}",
                    "a case of backward that only some rows/heads/channels take",
                    n_wrong, factor if factor_text else None)


def sizes_of(output: Sequence[int], inputs: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """Dimension sizes with a name a reader recognises, for reading factors: 'the size of dim
    0 of the output' (the batch, usually), of each input, and the output's element count."""
    sizes: dict[str, int] = {}
    for d, n in enumerate(output):
        sizes.setdefault(f"the size of dim {d} of the output", n)
    for name, shape in inputs.items():
        for d, n in enumerate(shape):
            if n not in sizes.values():
                sizes[f"the size of dim {d} of {name}"] = n
    count = math.prod(output)
    if count > 1 and count not in sizes.values():
        sizes["the output's element count"] = count
    return sizes
