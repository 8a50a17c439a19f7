"""How a gradient is wrong, not only where: simple relations between autograd and its reference
(symbolic, else finite differences with their error bound) tested on the elements a comparison
judged, the first that holds named.

* `factor`: autograd = c × reference at every judged element (−1: a sign flip; 1/n or n for a
  dimension size n: a mean where a sum belonged, or the reverse);
* `zero`: autograd is 0 wherever it disagrees (a missing term, a detached path);
* `transposed` / `permuted`: autograd is the reference with its axes swapped;
* `shifted`: autograd is the reference rolled or shifted by a step or two along one dim (an
  index off by one);
* `swapped`: autograd of one input is the reference of another (return order);
* `additive`: autograd = reference + a constant (an extra term);
* `ignored`: the forward ignores the elements (at any value) yet autograd is not zero;
* `partition`: the disagreement lies exactly where a predicate on the values holds (`x < 0`,
  `|x| > 1`, `x == 0`, a mask input: partitions.py), with what autograd is there;
* `subset`: the disagreement lies in some indices of one dimension (a row, a head), possibly
  with a factor there;
* `surrogate` (explain/surrogates.py): a surrogate gradient that does not integrate to what
  the forward does at a coarse scale; `sloped` the same module's word for a forward that is no
  step at all.
"""

# Long: one catalogue — each relation is a short test over the same arrays, tried in order, and
# its hint sits beside it; split, the order that decides which one is named would be in two
# places.

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import torch

from gradscope.compare.tolerance import FD_ERROR_FACTOR, Tolerance
from gradscope.explain import partitions
from gradscope.report.status import MISMATCH, OK

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
    predicate: str | None = None  # a value partition's (`|x| < 3`): what it predicts

    @property
    def message(self) -> str:
        return f"{self.text}{f': {self.reading}' if self.reading else ''}"


@dataclass(frozen=True)
class Scales:
    """What a factor may be read as: dimension sizes (a mean where a sum belonged) and the
    user's own numbers (a scale the backward forgot), each with the label a reader knows."""

    sizes: dict[str, int]
    numbers: dict[str, float]


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
    "shifted": "check the indices of backward against the forward's: the gradient is right but "
               "lands one or two places off",
    "ignored": "backward should give zero where the forward discards the input (as autograd "
               "of `result[:, :n] = 0` does)",
    "subset": "compare the branch of backward these elements take with the others'",
    "partition": "look at the branch of backward taken under this condition (a torch.where, a "
                 "mask, an if on the values): its formula differs from the forward's there",
    "sloped": "where the forward is flat its derivative is zero, and autograd's must be too: "
              "backward gives these elements a gradient the forward does not have (a sum over "
              "the wrong dimension, a mask, a term that should vanish where the output "
              "saturates)",
    "surrogate": "a surrogate must integrate to what the forward does at a coarse scale: check "
                 "its scale, its gate (hardtanh's |x| ≤ 1 for sign) and its sign; a surrogate "
                 "meant this way is declared with @gradscope.surrogate(reference=...) or "
                 "--surrogate NAME=EXPRESSION, and then compared with that reference",
}


def number(x: float) -> str:
    """A factor as people write it: −0.5, 0.25, 3 (a true minus sign), with the digits that
    tell it from 1 (1.0005, not 1.001)."""
    for digits in range(4, 10):
        text = f"{x:.{digits}g}"
        if abs(float(text) - x) <= 0.05 * abs(x - 1):
            break
    return text.replace("-", "\u2212")


def find(name: str, arrays: Arrays, tol: Tolerance, sizes: Mapping[str, int],
         others: Mapping[str, Arrays] | None = None,
         ignored: torch.Tensor | None = None,
         variables: Mapping[str, torch.Tensor] | None = None,
         numbers: Mapping[str, float] | None = None) -> Relation | None:
    """The first relation that holds between autograd and the reference of `name`;
    `ignored` marks the elements the forward was found to ignore at every value tried;
    `variables`: input values (shaped like `name`) a value partition may be drawn on;
    `numbers`: the user's own numbers (--arg values, defaults, constants in the code) a factor
    may be read as, besides the `sizes`."""
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
    sizes = Scales(dict(sizes), dict(numbers or {}))
    for test in (_zero, _factor, _axes, _shifted, _additive):
        rel = test(ag, ref, err, judged, wrong, tol, sizes)
        if rel is not None and (rel.kind != "zero" or rel.covers == total):
            return rel
    swapped = _swapped(name, ag, judged, tol, others or {})
    if swapped is not None:
        return swapped
    if variables:
        found = partitions.find(wrong, judged, variables)
        if found is not None:
            return _partitioned(found, ag, ref, err, judged, wrong, tol, sizes)
    zero = _zero(ag, ref, err, judged, wrong, tol, sizes)
    return zero if zero is not None else _subset(ag, ref, err, judged, wrong, tol, sizes, total)


def _partitioned(found: partitions.Partition, ag, ref, err, judged, wrong, tol,
                 scales) -> Relation:
    """The value partition, with what autograd is where it holds."""
    n, total = int(wrong.sum()), int(judged.sum())
    there, factor = _local(ag, ref, err, wrong, tol, scales)
    hidden = _hidden(ag, ref, judged, wrong, factor, scales)
    if hidden is not None:
        return hidden
    reading = f"the case of backward for {found.text} differs from the forward's"
    if factor:
        said = _reading(factor, scales)
        reading += f" ({said})" if said else ""
    return Relation("partition", f"wrong exactly where {found.said} ({n} of {total} "
                    f"element(s)){there}; autograd agrees elsewhere", reading, n, factor,
                    found.text)


def _local(ag, ref, err, wrong, tol, scales) -> tuple[str, float | None]:
    """What autograd is at the `wrong` elements: 0, or a factor of the derivative."""
    if bool((ag[wrong].abs() <= tol.atol).all()):
        return ", where autograd is 0", 0.0
    if bool(_significant(ref, err, tol)[wrong].all()):  # (one element too: its own factor)
        c = _fit(ag[wrong], ref[wrong])
        if c is not None:
            c = _snap(c, scales)
            if abs(c - 1) > tol.rtol and bool(_close(ag[wrong], c * ref[wrong], err[wrong],
                                                     tol, abs(c)).all()):
                sign = " (the opposite sign)" if abs(c + 1) <= tol.rtol else ""
                return f", where autograd = {number(c)} × the derivative{sign}", c
    return "", None


def _close(a: torch.Tensor, b: torch.Tensor, err: torch.Tensor, tol: Tolerance,
           scale: float = 1.0) -> torch.Tensor:
    limit = tol.atol + tol.rtol * torch.maximum(a.abs(), b.abs()) + FD_ERROR_FACTOR * scale * err
    return (a - b).abs() <= limit


def _zero(ag, ref, err, judged, wrong, tol, scales) -> Relation | None:
    if not bool((ag[wrong].abs() <= tol.atol).all()):
        return None
    n = int(wrong.sum())
    everywhere = bool((ag[judged].abs() <= tol.atol).all())
    where = "at every element" if everywhere else f"at the {n} element(s) that disagree"
    return Relation("zero", f"autograd is 0 {where} while the derivative is not",
                    "a missing term or a detached path (.detach(), torch.no_grad, a zero or "
                    "None returned by backward)", n, 0.0)


def _factor(ag, ref, err, judged, wrong, tol, scales) -> Relation | None:
    # A factor is read only where the reference is clearly not zero at every element that
    # disagrees: a ratio to a reference that is round-off says nothing.
    if not bool(_significant(ref, err, tol)[wrong].all()):
        return None
    # (a factor on the disagreeing part only is a `subset`, which says where)
    c = _fit(ag[judged], ref[judged])
    if c is None or abs(c - 1.0) <= tol.rtol:
        return None
    c = _snap(c, scales)
    if not bool(_close(ag[judged], c * ref[judged], err[judged], tol, abs(c)).all()):
        return None
    n = int(judged.sum())
    if n == 1:
        return Relation("factor", f"autograd = {number(c)} × the derivative (one element: a "
                        "ratio, not a pattern)", _reading(c, scales), 1, c)
    return Relation("factor", f"autograd = {number(c)} × the derivative at every element",
                    _reading(c, scales), n, c)


def _hidden(ag, ref, judged, wrong, factor: float | None, scales) -> Relation | None:
    """A part said wrong while the rest 'agrees' is a prediction about the rest: there autograd
    must read as the derivative. Where the elements within tolerance read as the wrong ones
    do instead — nearer factor × the derivative than the derivative — the tolerance (a loose
    one: what autocast measurably changed) hid the same error there: it is everywhere. The
    factor is fitted on the wrong elements and tested on the others."""
    if factor is None:
        factor = _fit(ag[wrong], ref[wrong])
        factor = _snap(factor, scales) if factor is not None else None
    if factor is None or factor == 1.0:
        return None
    rest = judged & ~wrong & (ref.abs() > 1e-3 * float(ref[judged].abs().max()))
    if int(rest.sum()) < 1:
        return None
    nearer = (ag[rest] - factor * ref[rest]).abs() < (ag[rest] - ref[rest]).abs()
    if float(nearer.double().mean()) <= 0.5:
        return None
    n, total, k, m = int(wrong.sum()), int(judged.sum()), int(nearer.sum()), int(rest.sum())
    return Relation("factor", f"autograd ≈ {number(factor)} × the derivative at every element: "
                    f"beyond the tolerance at {n} of {total}, and nearer {number(factor)} × "
                    f"the derivative than the derivative at {k} of the {m} others (within "
                    "this run's tolerance, which hid it there)", _reading(factor, scales),
                    total, factor)


def _significant(ref: torch.Tensor, err: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    return ref.abs() > 10 * (tol.atol + FD_ERROR_FACTOR * err)


def _fit(ag: torch.Tensor, ref: torch.Tensor) -> float | None:
    """Least-squares c in ag ≈ c·ref (None when the reference is zero)."""
    denom = float((ref * ref).sum())
    if denom == 0.0 or not math.isfinite(denom):
        return None
    c = float((ag * ref).sum()) / denom
    return c if math.isfinite(c) and c != 0.0 else None


def _snap(c: float, scales: Scales) -> float:
    """c rounded to the simple number it almost is (1/4, −1, 3, a user's 1/2.5), where it
    almost is one."""
    candidates = [float(Fraction(c).limit_denominator(16))]
    for n in [*scales.sizes.values(), *scales.numbers.values()]:
        if n and abs(n) != 1:
            candidates += [sign * v for v in (n, 1 / n) for sign in (1, -1)]
    for f in candidates:
        if f != 0 and abs(f - c) <= 1e-6 * abs(c):
            return f
    return c


def _readings(magnitude: float, scales: Scales) -> list[str]:
    """Every way of reading |c| as one of the user's numbers or a size."""
    out = []
    for label, v in scales.numbers.items():
        v = abs(v)
        if v in (0.0, 1.0):
            continue
        if abs(magnitude - 1.0 / v) < 1e-9 / v:
            out.append(f"1/{number(v)}, {number(v)} being {label}: a factor of it missing from "
                       "backward?")
        elif abs(magnitude - v) < 1e-9 * v:
            out.append(f"{number(v)}, {label}: a factor of it too many in backward?")
    for label, n in scales.sizes.items():
        if n > 1 and abs(magnitude - 1.0 / n) < 1e-9 * n:
            out.append(f"1/{n}, {n} being {label}: a mean where a sum belonged, or a division "
                       "by the batch size?")
        elif n > 1 and abs(magnitude - n) < 1e-9 * n:
            out.append(f"{n}, {label}: a sum where a mean belonged?")
    return out


def _reading(c: float, scales: Scales) -> str:
    """What a factor usually means: every reading that fits is named (the values cannot
    tell between them), none when none does."""
    magnitude = abs(c)
    if abs(magnitude - 1.0) < 1e-9:
        return "the sign is flipped (a minus too many or too few)"
    if c < 0:
        return (f"the sign is flipped and the size scaled by {number(magnitude)}: what a "
                "gradient-reversal layer does on purpose (declare it with --surrogate)")
    found = _readings(magnitude, scales)
    if len(found) == 1:
        return f"{number(magnitude)} = {found[0]}"
    if found:
        return (f"several readings fit, the values cannot tell which: {number(magnitude)} = "
                + "; or ".join(found))
    if abs(magnitude - 2.0) < 1e-9 or abs(magnitude - 0.5) < 1e-9:
        return ("a factor 2 missing or too many (the 2 of d(x²) = 2x, a ½ of a mean of "
                "two?)")
    return ""


def _axes(ag, ref, err, judged, wrong, tol, scales) -> Relation | None:
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


SHIFTS = (1, -1, 2, -2)  # the steps a misplaced gradient is looked for at, along each dim


def _shifted(ag, ref, err, judged, wrong, tol, scales) -> Relation | None:
    """autograd is the derivative moved along one dim: rolled (wrapping round) or shifted
    (zeros coming in) by a step or two — an off-by-one index, a roll or a shift in backward."""
    for dim in range(ag.ndim):
        n = ag.shape[dim]
        for step in SHIFTS:
            if n <= abs(step):
                continue
            rolled = ref.roll(step, dim)
            shifted = rolled.clone()
            edge = torch.arange(n) < step if step > 0 else torch.arange(n) >= n + step
            shifted[(slice(None),) * dim + (edge,)] = 0
            for moved, how in ((rolled, "rolled"), (shifted, "shifted")):
                if bool(_close(ag, moved, err.roll(step, dim), tol).all()):
                    where = f"i{step:+d}" if ag.ndim == 1 else f"i{step:+d} along dim {dim}"
                    return Relation(
                        "shifted", f"autograd is the derivative {how} by {step} along dim "
                        f"{dim}: the gradient of element i lands at {where}",
                        "an index off by one in backward (a roll, a shift, a slice that starts "
                        "one place early or late)", int(judged.sum()))
    return None


def _additive(ag, ref, err, judged, wrong, tol, scales) -> Relation | None:
    diff = (ag - ref)[judged]
    if diff.numel() < 2:
        return None
    d = float(diff.median())
    if abs(d) <= tol.atol:
        return None
    c = _fit(ag[judged], ref[judged])
    if c is not None and float((ag[judged] - c * ref[judged]).abs().sum()) < 0.5 * float(
            (diff - d).abs().sum()):
        return None  # a factor reads the numbers far better: a shift fits only a loose bound
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


def _subset(ag, ref, err, judged, wrong, tol, scales, total) -> Relation | None:
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
    there, factor = _local(ag, ref, err, wrong, tol, scales)
    hidden = _hidden(ag, ref, judged, wrong, factor, scales)
    if hidden is not None:
        return hidden
    if best is None:
        if not there or factor == 0.0:
            return None
        return Relation("subset", f"autograd agrees at {total - n_wrong} of {total} element(s)"
                        f"{there}", "", n_wrong, factor)
    if n_wrong == 1:
        index = [int(i) for i in torch.nonzero(wrong)[0].tolist()]
        return Relation("subset", f"the disagreement lies in one element, "
                        f"[{', '.join(map(str, index))}]{there}; autograd agrees elsewhere",
                        "a case of backward that one element takes (an index written by hand, "
                        "a boundary)", 1, factor)
    _, dim, picked = best
    listed = ", ".join(map(str, picked[:MAX_LISTED])) + (", …" if len(picked) > MAX_LISTED
                                                         else "")
    # (a vector's indices are its elements, no rows: where they lie, and no story)
    reading = "a case of backward that only some rows/heads/channels take" if wrong.ndim > 1 \
        else ""
    return Relation("subset", f"the disagreement lies in index {listed} of dim {dim} only "
                    f"({n_wrong} element(s)){there}; autograd agrees elsewhere", reading,
                    n_wrong, factor)


def located(rel: Relation) -> bool:
    """A relation that states where the error lies (some rows, a region of values): a rule
    fitted to one comparison, which another can test (rule 4)."""
    return rel.kind == "partition" or rel.text.startswith("the disagreement lies in")


def same_rule(one: Relation | None, other: Relation) -> bool:
    """Whether two comparisons found the same rule (kind and where; counts aside)."""
    def rule(rel: Relation) -> tuple[str, str]:
        return rel.kind, rel.text.split(" (")[0].split(";")[0]
    return one is not None and rule(one) == rule(other)


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


# a common factor found must account for this share of the change at the elements it was not
# fitted to, and the fit there must agree with it to this share of its distance from 1
EXPLAINS, AGREES = 0.5, 0.25


def common_factor(ag: torch.Tensor, ref: torch.Tensor, beyond: float) -> float | None:
    """The factor c of `ag` ≈ c · `ref` where there is one, |c − 1| past `beyond` (rule 4: fitted
    by least squares on every other element where both are finite and `ref` is not 0, it
    accounts for EXPLAINS of the difference at the others, and a fit on those agrees); else
    None. Rounding errors have no common sign and size across a tensor: a half-precision path
    wrong by 5 % is one, bfloat16's rounding of a right one is not."""
    ag, ref = ag.reshape(-1).double(), ref.reshape(-1).double()
    usable = torch.isfinite(ag) & torch.isfinite(ref) & ref.ne(0)
    a, t = ag[usable], ref[usable]
    if a.numel() < 4:
        return None
    fit, held = slice(0, None, 2), slice(1, None, 2)

    def fitted(part: slice) -> float:
        return float((a[part] * t[part]).sum() / (t[part] * t[part]).sum())

    c, again = fitted(fit), fitted(held)
    if abs(c - 1) <= beyond or abs(again - 1) <= beyond or (c - 1) * (again - 1) <= 0:
        return None
    change = float((a[held] - t[held]).norm())
    if not change or float((a[held] - c * t[held]).norm()) > EXPLAINS * change \
            or abs(again - c) > AGREES * abs(c - 1):
        return None
    return c
