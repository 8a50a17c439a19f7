"""VALUE text → tensors: the forms of `--at`, `--grad`, `--tangent` and `--shape`.

VALUE is a number (`1.5`), a comma list (`1,2,3`), a nested list (`[[1,2],[3,4]]`) or a seeded
generator (`spread(4,6)`, `randn(2,6)`, `rand(3)`, `uniform(lo,hi,2,3)`, `ones(3)`, `zeros(3)`,
`linspace(lo,hi,n)`, `arange(n)`). Text is read with `ast` and a whitelist, never evaluated;
sizes are checked before anything is allocated. Values are made in float64 on the CPU; the
pipeline casts them to the requested dtype and device.

A seeded generator's origin is the plain torch call that makes the same values (its generator
seeded with the input's own seed, derived from --seed and the input's name), so anyone can
reproduce them without gradscope. `spread` is what inputs nobody gave get: every value of an
even grid over [-SPREAD, SPREAD] once, in a seeded order — both signs, an exact zero (for an
odd count), values near zero and magnitudes past the usual saturation points (relu6, hardtanh,
tanh, sigmoid), so a branch of the forward that default inputs would miss is reached.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, replace
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.option_text import (
    FORMS,
    GENERATORS,
    MAX_DIMS,
    MAX_ELEMENTS,
    check_shape,
    shortened,
)
from gradscope.rng import generator, seed_for

MAX_VALUE_TEXT = 2_000_000
# spread(): values over [-SPREAD, SPREAD]: past relu6's 6, and not a whole or half number
# (round's jumps), so no grid of it lands on a kink of a common op
SPREAD = 6.37
# ...and in half precision, where past ~1.5 the common nonlinearities saturate until their
# gradients fall below what 16 bits resolve (tanh(x²) at x = 1.8: 1 − tanh² is 14 % off)
SPREAD_HALF = 1.37


@dataclass(frozen=True)
class InputValue:
    """A tensor and how it came to be (shown to the user next to the numbers); `chosen`:
    gradscope chose the values (nobody gave them), so a point outside the target's domain among
    them is gradscope's choice, not the target's failure."""

    tensor: torch.Tensor
    origin: str
    chosen: bool = False
    brief: str = ""  # how the header says it ("spread(25) over ±6.37, shuffled (seed 12)")

    @property
    def said(self) -> str:
        """The short form where there is one, else the origin."""
        return self.brief or self.origin

    def noted(self, note: str, **changes: Any) -> InputValue:
        """The same value with `note` added to both forms ("· default shape (25,)")."""
        return replace(self, origin=f"{self.origin} · {note}",
                       brief=f"{self.brief} · {note}" if self.brief else "", **changes)


def parse_value(text: str, what: str, *, seed: int = 0, name: str = "",
                limit: int = MAX_ELEMENTS, spread: float | None = None) -> InputValue:
    """Parse a VALUE. `what` names the option in messages (e.g. `--at x`)."""
    if not isinstance(text, str):
        raise UsageError(f"{what}: expected text, got {type(text).__name__}")
    if len(text) > MAX_VALUE_TEXT:
        raise UsageError(f"{what}: value text is longer than {MAX_VALUE_TEXT:,} characters; "
                         "use a generator such as randn(1000)")
    src = text.strip()
    if not src:
        raise UsageError(f"{what}: empty value; it can be {FORMS}")
    try:
        tree = ast.parse(src, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise UsageError(f"{what}: cannot read {shortened(src)!r}; it can be {FORMS}") from None
    if isinstance(tree, ast.Call):
        return _generator(tree, src, what, seed, name, limit, spread or SPREAD)
    data = _literal(tree, src, what, depth=0)
    tensor = torch.tensor(data, dtype=torch.float64)
    if tensor.numel() == 0:
        raise UsageError(f"{what}: {shortened(src)!r} is empty; an empty tensor has no gradient "
                         "to check")
    check_shape(tuple(tensor.shape), what, limit)
    return InputValue(tensor, "given")


def _number(node: ast.AST) -> float | None:
    sign = 1.0
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        sign = -sign if isinstance(node.op, ast.USub) else sign
        node = node.operand
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
            and not isinstance(node.value, bool):
        try:
            return sign * float(node.value)
        except OverflowError:
            return math.inf
    return None


def _literal(node: ast.AST, src: str, what: str, depth: int):
    if depth > MAX_DIMS:
        raise UsageError(f"{what}: nested deeper than {MAX_DIMS} levels")
    number = _number(node)
    if number is not None:
        if not math.isfinite(number):
            raise UsageError(f"{what}: {shortened(src)!r} holds a number too large for float64")
        return number
    if isinstance(node, ast.Tuple | ast.List):
        items = [_literal(e, src, what, depth + 1) for e in node.elts]
        shapes = {_shape_of(i) for i in items}
        if len(shapes) > 1:
            raise UsageError(f"{what}: {shortened(src)!r} is ragged: every row needs the same "
                             "length")
        return items
    if isinstance(node, ast.Name) and node.id.lower() in ("nan", "inf", "infinity"):
        raise UsageError(f"{what}: NaN and infinity are not allowed in input values "
                         "(gradients there are undefined)")
    raise UsageError(f"{what}: cannot read {shortened(src)!r}; it can be {FORMS}")


def _shape_of(item) -> tuple[int, ...]:
    shape = []
    while isinstance(item, list):
        shape.append(len(item))
        item = item[0] if item else None
    return tuple(shape)


def _generator(call: ast.Call, src: str, what: str, seed: int, name: str,
               limit: int, spread: float) -> InputValue:
    fname = call.func.id if isinstance(call.func, ast.Name) else None
    if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) \
            and call.func.value.id == "torch":  # torch.randn(2,5): torch's spelling
        fname = call.func.attr
    if fname not in GENERATORS or call.keywords:
        raise UsageError(f"{what}: unknown generator {shortened(src)!r}; generators are "
                         + ", ".join(GENERATORS))
    raw_args = list(call.args)
    if raw_args and isinstance(raw_args[-1], ast.Tuple | ast.List):  # randint(0,9,(2,8))
        raw_args = raw_args[:-1] + list(raw_args[-1].elts)
    args = [_number(a) for a in raw_args]
    if any(a is None or not math.isfinite(a) for a in args):
        raise UsageError(f"{what}: arguments of {fname}() must be plain numbers, got "
                         f"{shortened(src)!r}")
    nums: list[float] = args  # type: ignore[assignment]

    def shape_from(values: list[float]) -> tuple[int, ...]:
        if not values or not all(v == int(v) and v >= 0 for v in values):
            raise UsageError(f"{what}: {fname}() needs a shape of whole numbers, e.g. "
                             f"{fname}({'0,1,' if fname == 'uniform' else ''}2,3)")
        shape = tuple(int(v) for v in values)
        check_shape(shape, what, limit)
        return shape

    drawn = seed_for(seed, name)
    tensor, origin = _made(fname, nums, src, what, generator(seed, name),
                           f"generator=torch.Generator().manual_seed({drawn})", shape_from,
                           spread)
    if not bool(torch.isfinite(tensor).all()):  # hi − lo overflowed: inf tangents prove nothing
        raise UsageError(f"{what}: {shortened(src)!r} makes values that are not finite (the range "
                         "overflows float64); use bounds whose difference is finite, e.g. "
                         "within ±1e300")
    return InputValue(tensor, origin, brief=_brief(fname, src, spread, drawn))


def respread(value: InputValue, spread: float, was: float = SPREAD) -> InputValue:
    """A drawn `spread(...)` value over ±`spread` instead of ±`was`: the same shape and
    shuffled order (the same seed), its words and its torch call changed to match."""
    n = value.tensor.numel()
    centre = (n - 1) / 2
    old, new = 2 * was / max(n - 1, 1), 2 * spread / max(n - 1, 1)
    index = torch.round(value.tensor / old + centre)
    tensor = (index - centre) * new
    return replace(value, tensor=tensor,
                   origin=value.origin.replace(f"* {old!r})", f"* {new!r})", 1),
                   brief=value.brief.replace(f"over ±{was:g}", f"over ±{spread:g}", 1))


def _brief(fname: str, src: str, spread: float, seed: int) -> str:
    """The header's words for a drawn value; '' where the origin is short already."""
    if fname == "spread":
        return f"{src} over ±{spread:g}, shuffled (seed {seed})"
    if fname in ("randn", "rand", "uniform", "randint"):
        return f"{src} (seed {seed})"
    return ""


INT64 = 2.0 ** 63


def _made(fname: str, nums: list[float], src: str, what: str, gen: torch.Generator,
          made: str, shape_from: Any, spread: float) -> tuple[torch.Tensor, str]:
    """The values of one generator call and the plain torch call that makes them (`made`:
    the keyword that seeds its generator)."""
    origin = src
    if fname == "spread":
        shape = shape_from(nums)
        n = math.prod(shape)
        centre, step = (n - 1) / 2, 2 * spread / max(n - 1, 1)
        order = torch.randperm(n, generator=gen)
        # (arange − centre)·step, not linspace: the middle of an odd count is exactly 0
        tensor = ((torch.arange(n, dtype=torch.float64) - centre) * step)[order].reshape(shape)
        origin = (f"{src}: ((torch.arange({n}, dtype=torch.float64) - {centre!r}) * {step!r})"
                  f"[torch.randperm({n}, {made})].reshape({_dims(shape)})")
    elif fname == "randn":
        tensor = torch.randn(shape_from(nums), generator=gen, dtype=torch.float64)
        origin = f"{src}: torch.randn({_dims(tensor.shape)}, {made}, dtype=torch.float64)"
    elif fname == "rand":
        tensor = torch.rand(shape_from(nums), generator=gen, dtype=torch.float64)
        origin = f"{src}: torch.rand({_dims(tensor.shape)}, {made}, dtype=torch.float64)"
    elif fname == "uniform":
        if len(nums) < 3 or not nums[0] < nums[1]:
            raise UsageError(f"{what}: uniform(lo, hi, *shape) needs lo < hi and a shape, "
                             "e.g. uniform(-1,1,2,3)")
        lo, hi = nums[0], nums[1]
        tensor = lo + (hi - lo) * torch.rand(shape_from(nums[2:]), generator=gen,
                                             dtype=torch.float64)
        origin = (f"{src}: {lo:g} + {hi - lo:g} * torch.rand({_dims(tensor.shape)}, {made}, "
                  "dtype=torch.float64)")
    elif fname == "randint":
        if len(nums) < 3 or not nums[0] < nums[1] or any(v != int(v) for v in nums[:2]):
            raise UsageError(f"{what}: randint(lo, hi, *shape) needs whole numbers lo < hi "
                             "and a shape, e.g. randint(0,10,2,8): values lo <= v < hi")
        if not all(-INT64 <= v < INT64 for v in nums[:2]):  # (as floats: 2**63 − 1 is 2**63)
            raise UsageError(f"{what}: randint's bounds must lie below 2**63 in size "
                             f"(torch draws int64), got {shortened(src)!r}")
        tensor = torch.randint(int(nums[0]), int(nums[1]), shape_from(nums[2:]), generator=gen
                               ).to(torch.float64)
        origin = (f"{src}: torch.randint({int(nums[0])}, {int(nums[1])}, "
                  f"({_dims(tensor.shape)}{',' if tensor.ndim == 1 else ''}), {made})")
    elif fname in ("ones", "zeros"):
        maker = torch.ones if fname == "ones" else torch.zeros
        tensor = maker(shape_from(nums), dtype=torch.float64)
    elif fname == "linspace":
        if len(nums) != 3:
            raise UsageError(f"{what}: linspace(lo, hi, n) takes three numbers")
        (n,) = shape_from(nums[2:])
        tensor = torch.linspace(nums[0], nums[1], n, dtype=torch.float64)
    else:
        if len(nums) != 1:
            raise UsageError(f"{what}: arange(n) takes one whole number")
        (n,) = shape_from(nums)
        tensor = torch.arange(n, dtype=torch.float64)
    return tensor, origin


def _dims(shape: tuple[int, ...] | torch.Size) -> str:
    return ", ".join(str(s) for s in shape)


def random_value(shape: tuple[int, ...], seed: int, name: str,
                 domain: tuple[float, float] | None, limit: int = MAX_ELEMENTS,
                 spread: float = SPREAD) -> InputValue:
    """A seeded default input: `spread` (both signs, zero, past saturation), or uniform over
    `domain` when an op needs one; a scalar is randn's or uniform's one value."""
    check_shape(shape, f"input {name}", limit)
    dims = ",".join(str(s) for s in shape)
    if domain is None:
        if not shape:
            return _scalar(seed, name)
        return parse_value(f"spread({dims})", f"input {name}", seed=seed, name=name,
                           limit=limit, spread=spread)
    lo, hi = domain
    if not shape:
        gen = generator(seed, name)
        t = lo + (hi - lo) * torch.rand((), generator=gen, dtype=torch.float64)
        return InputValue(t, f"uniform({lo:g},{hi:g}): {lo:g} + {hi - lo:g} * torch.rand((), "
                             f"generator=torch.Generator().manual_seed({seed_for(seed, name)}),"
                             " dtype=torch.float64)")
    return parse_value(f"uniform({lo:g},{hi:g},{dims})", f"input {name}", seed=seed, name=name,
                       limit=limit)


def _scalar(seed: int, name: str) -> InputValue:
    gen = generator(seed, name)
    return InputValue(torch.randn((), generator=gen, dtype=torch.float64),
                      f"randn(): torch.randn((), generator=torch.Generator().manual_seed("
                      f"{seed_for(seed, name)}), dtype=torch.float64)")
