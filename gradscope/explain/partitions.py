"""Where a gradient is wrong, by value: the predicate on the inputs' values that holds exactly at
the elements that disagree (`x < 0`, `|x| > 1`, `x == 0`, `mask == 0` for a mask given as
another input), as a branch of backward would draw it.

A predicate is reported only when it separates the disagreeing elements from the agreeing ones
exactly, with MIN_SIDE elements on each side at least (exact zeros aside: `x == 0` may be one
element); its threshold is the simplest number in the gap the values leave (0 before ±1
before halves and small integers, before a rounded midpoint). Where predicates on different
inputs separate them equally well, all are named: the values cannot tell which branch it is.
Index partitions (a row, a head) are relations.py's, tried after.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from gradscope.report.status import MISMATCH, OK

# thresholds people write, simplest first (a branch on x < 0 before one on x < 0.5)
SIMPLE = (0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 6.0, -6.0, 0.1, -0.1, 1.5, -1.5,
          4.0, -4.0, 5.0, -5.0, 10.0, -10.0, 0.25, -0.25)
MAX_VARIABLES = 8  # inputs tried as the partition's variable
# elements each side needs before a predicate is a rule: with fewer, a threshold in the gap
# they leave is fitted to them (a one-element sign flip "wrong exactly where x < −0.9", a sign
# error everywhere but at the one zero "wrong exactly where x ≠ 0")
MIN_SIDE = 3


@dataclass(frozen=True)
class Partition:
    """`text` holds exactly where the elements disagree (`x < 0`); `alternatives`: other
    predicates that separate them as well."""

    text: str
    alternatives: tuple[str, ...] = field(default_factory=tuple)

    @property
    def said(self) -> str:
        if not self.alternatives:
            return self.text
        return f"{self.text} (or, the values cannot tell, {' or '.join(self.alternatives)})"


def find(wrong: torch.Tensor, judged: torch.Tensor,
         variables: Mapping[str, torch.Tensor]) -> Partition | None:
    """The simplest value predicate that holds exactly where `wrong`, among the `judged`
    elements (None: none does, or nothing agrees, or nothing disagrees)."""
    w = wrong[judged].reshape(-1)
    if not bool(w.any()) or bool(w.all()):
        return None
    # (one wrong element, or one right zero among the wrong, draws any line: only the exact
    # zeros, where a formula divides by the value, are a rule that few elements can show)
    few = int(w.sum()) < MIN_SIDE or int((~w).sum()) < MIN_SIDE
    found: list[tuple[float, str]] = []
    for label, v in list(variables.items())[:MAX_VARIABLES]:
        try:
            values = v.detach().double().expand(wrong.shape)[judged].reshape(-1)
        except RuntimeError:  # not shaped like the input: it draws no partition here
            continue
        if not bool(torch.isfinite(values).all()):
            continue
        found += _predicates(label, values, w, few)
    if not found:
        return None
    found.sort(key=lambda item: item[0])
    best = found[0]
    variable = best[1].split(" ")[0].strip("|")
    others: dict[str, str] = {}  # one per other variable, its simplest
    for score, text in found[1:]:
        other = text.split(" ")[0].strip("|")
        if other != variable and score <= best[0] + 1:
            others.setdefault(other, text)
    return Partition(best[1], tuple(others.values())[:2])


def _predicates(label: str, v: torch.Tensor, w: torch.Tensor, few: bool = False
                ) -> list[tuple[float, str]]:
    """(score, text) of each predicate on `v` that separates `w` exactly (lower: simpler);
    `few`: a side has fewer than MIN_SIDE elements, and only `== 0` is tried."""
    out = []
    zero = v == 0
    if bool(zero.any()) and bool((zero == w).all()):
        out.append((0.0, f"{label} == 0"))
    if few:
        return out
    if bool(zero.any()) and bool((~zero == w).all()):
        out.append((0.1, f"{label} ≠ 0"))
    binary = bool(((v == 0) | (v == 1)).all())
    if binary:  # a mask: its two values are the whole story
        return out
    for signed, values, name in ((True, v, label), (False, v.abs(), f"|{label}|")):
        below = _split(values[w], values[~w])  # wrong where values < t
        if below is not None:
            out.append(_said(name, "<", below, signed))
        above = _split(values[~w], values[w])  # wrong where values > t
        if above is not None:
            out.append(_said(name, ">", above, signed))
    return out


def _split(low: torch.Tensor, high: torch.Tensor) -> tuple[float, float] | None:
    """The gap (a, b) when every value of `low` lies below every value of `high`."""
    a, b = float(low.max()), float(high.min())
    return (a, b) if a < b else None


def _said(name: str, op: str, gap: tuple[float, float], signed: bool) -> tuple[float, str]:
    """`name < t` (op "<": the low side is wrong) or `name > t`, t the simplest number that
    separates the gap (a, b): `≤ a` or `≥ b` when that number is the gap's own end."""
    a, b = gap
    for rank, t in enumerate(SIMPLE):
        if not signed and t < 0:
            continue
        if op == "<":
            sign = "<" if a < t <= b else "≤" if t == a else None
        else:
            sign = ">" if a <= t < b else "≥" if t == b else None
        if sign is not None:
            return rank + (0.0 if signed else 0.25), f"{name} {sign} {_n(t)}"
    return float(len(SIMPLE)) + 1, f"{name} {op} {_n(_round((a + b) / 2, a, b))}"


def _round(x: float, a: float, b: float) -> float:
    """x with as few significant digits as keep it inside (a, b)."""
    for digits in range(1, 8):
        r = float(f"{x:.{digits}g}")
        if a < r < b:
            return r
    return x


def _n(x: float) -> str:
    return (f"{x:g}" if math.isfinite(x) else str(x)).replace("-", "\u2212")


# a predicate as `Partition.text` writes it: `x < 0`, `|x| ≥ 1.5`, `mask == 0`, `x ≠ 0`
PREDICATE = re.compile(r"^(\|?)([^\s|]+)\1 (<|≤|>|≥|==|≠) (\S+)$")
COMPARE = {"<": torch.lt, "≤": torch.le, ">": torch.gt, "≥": torch.ge, "==": torch.eq,
           "≠": torch.ne}


def holds(text: str, variables: Mapping[str, torch.Tensor]) -> torch.Tensor | None:
    """Where the predicate `text` (a `Partition.text`) holds at other values of its variable:
    what the partition predicts, to test it on data it was not fitted to (rule 4). None where
    the text is no predicate this module writes or its variable is not given."""
    found = PREDICATE.match(text)
    if found is None or found.group(2) not in variables:
        return None
    try:
        threshold = float(found.group(4).replace("\u2212", "-"))
    except ValueError:
        return None
    values = variables[found.group(2)].detach().double()
    values = values.abs() if found.group(1) else values
    return COMPARE[found.group(3)](values, threshold)


def elsewhere(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """Other values to test a partition of `x` at: `x` moved by half its spread (seeded
    normal noise), in its own dtype — many elements cross a threshold, a position stays."""
    spread = max(float(x.double().std()) if x.numel() > 1 else 1.0, 1e-3)
    noise = torch.randn(x.shape, generator=generator, dtype=torch.float64).to(x.device)
    return (x.double() + 0.5 * spread * noise).to(x.dtype)


def predicts(text: str, variables: Mapping[str, torch.Tensor], status: torch.Tensor) -> bool:
    """Whether the predicate `text` names exactly the elements `status` (element statuses of
    a comparison at `variables`, values it was not fitted to) found wrong, among those it
    judged: the partition held (rule 4)."""
    where = holds(text, variables)
    if where is None or where.shape != status.shape:
        return False
    judged = (status == OK) | (status == MISMATCH)
    wrong = status == MISMATCH
    return bool(judged.any()) and bool((where.to(wrong.device)[judged] == wrong[judged]).all())
