"""Which inputs finite differences estimate element by element and which they sample: a pure
function of sizes and flags (and of what one evaluation keeps and computes, counted, never
timed: the same check on a busy machine checks the same elements), with the numbers the note
quotes."""

from __future__ import annotations

from typing import Any

MAX_DENSE_WORK = 2e9  # columns × elements each evaluates × 4 points, for dense differences
# Jacobian entries finite differences keep, all inputs together (estimate and error: 2 × 8
# bytes each, 2 GB; a dense refinement's second difference 1 GB more): a full 10,000 ×
# 10,000 Jacobian fits, as gradcheck's slow mode would need; an input whose columns would
# hold more than its share is sampled (random projections cover every element)
MAX_STORED_ENTRIES = 1 << 27
# Finite-difference columns that each need a whole evaluation are also bounded by the
# floating-point operations they perform, counted once with torch's FlopCounterMode: an
# expensive target (a big matmul, a convolution stack) costs more than its size says. Every
# such column gets a two-point difference first (two evaluations; the doubted ones are refined
# later), so the budget is shared out as 2 × columns × one evaluation's flops over all inputs
# together: a model of 34,000 parameter elements whose forward costs a million operations is
# checked element by element (7e10, 5 s), one of 110,000 on 16 tokens too (8e11). About a
# minute of float64 CPU work at most (vmapped batches run at about 15 GFLOP/s on 2 cores).
MAX_DENSE_FLOPS = 1e12
# A model past that budget is checked at scale (docs/models.md, "Models at scale"): its custom
# Functions per element in place, its composition by projections over every parameter at
# once, and a seeded per-element sample sharing this smaller budget (a few seconds of work;
# a tensor whose share is less than one column gets none: the projections cover it)
MAX_SAMPLE_FLOPS = 1e11


def at_scale(fd: Any, parameters: Any, max_fd: int, sample: int) -> bool:
    """Whether a model is checked at scale: some parameter tensor would be sampled."""
    return any(sample_size(fd, n, max_fd, sample) is not None
               for n in parameters if n in fd.values)


def sample_size(fd: Any, name: str, max_fd: int, sample: int, scale: bool = False,
                every: bool = False) -> int | None:
    """How many columns to sample for `name`, or None for one column per element (all at
    once when the input is elementwise). At scale the sample shares MAX_SAMPLE_FLOPS and may
    be empty. `every`: each element whose column memory holds, whatever the columns cost."""
    if fd.is_elementwise(name):
        return None
    n_in, n_out = fd.values[name].numel(), max(1, fd.out.numel())
    kept = _stored_share(fd, name)
    stored = n_in * n_out <= kept
    if every:  # (as many as memory holds, whatever they cost)
        return None if stored else max(1, min(n_in, kept // n_out))
    width = fd.column_width(name)
    # a model's column costs its matmuls and convolutions, which the flop budget counts (the
    # perturbed copy with it); where the counted operations do not dominate everything a
    # column moves or keeps (elementwise work, which FlopCounterMode does not count), the
    # copy-work cap bounds the columns as well
    model = width is None and fd.flops() > max(n_in, n_out, fd.point.activations())
    work = n_in if model else _work_share(fd, name)
    by_flops = n_in if width is not None else _flop_share(fd, n_in)
    if n_in <= max_fd and n_in <= work and stored and n_in <= by_flops and not scale:
        return None
    if scale and width is None:
        by_flops = _flop_share(fd, n_in, MAX_SAMPLE_FLOPS)
    affordable = int(min(work, kept // n_out, by_flops))
    return max(0 if scale else 1, min(sample, n_in, affordable))


def _stored_share(fd: Any, name: str) -> int:
    """Jacobian entries `name` may keep: MAX_STORED_ENTRIES shared by every input estimated
    column by column (the memory of the whole check is bounded, not each tensor's)."""
    n_out = max(1, fd.out.numel())
    need = {n: fd.values[n].numel() * n_out for n in fd.values if not fd.is_elementwise(n)}
    return int(_shared(need, MAX_STORED_ENTRIES).get(name, MAX_STORED_ENTRIES))


def _shared(need: dict[str, float], budget: float) -> dict[str, float]:
    """`budget` shared by inputs that each `need` so much: those that need least get all
    they need first, the rest share what is left evenly."""
    left, share = float(budget), {}
    for k, n in enumerate(sorted(need, key=lambda n: (need[n], n))):
        share[n] = min(need[n], left / (len(need) - k))
        left -= share[n]
    return share


def _per_column(fd: Any, name: str) -> int:
    """Elements one column of `name` moves: incremental columns touch their widest node;
    others a perturbed copy of the input, and everything one evaluation computes (an
    intermediate far wider than the input or the output, say `outer(x, y)`, included)."""
    n_in, n_out = fd.values[name].numel(), max(1, fd.out.numel())
    width = fd.column_width(name)
    if width is not None:
        return max(n_out, width)
    return max(n_in, n_out, fd.point.elements())


def _work_share(fd: Any, name: str) -> int:
    """Columns of `name` the copy-work cap affords, the cap shared by every input estimated
    column by column (the whole evaluation's work is bounded, not each tensor's)."""
    cost = {n: 4.0 * _per_column(fd, n) for n in fd.values if not fd.is_elementwise(n)}
    if name not in cost:
        return fd.values[name].numel()
    need = {n: fd.values[n].numel() * c for n, c in cost.items()}
    return int(_shared(need, MAX_DENSE_WORK)[name] // cost[name])


def _flop_share(fd: Any, n_in: int, budget: float | None = None) -> int:
    """Columns of an input with n_in elements that the flop budget affords: all of them when
    every whole-evaluation column of every input fits, else a share in proportion to size.
    A column costs one evaluation's flops plus its perturbed copy of the input."""
    sizes = [v.numel() for n, v in fd.values.items() if not fd.is_elementwise(n)]
    flops = max(fd.flops(), 1)
    need = 2.0 * sum(n * (flops + n) for n in sizes)
    budget = MAX_DENSE_FLOPS if budget is None else budget  # (read now: tests lower it)
    return n_in if need <= budget else int(n_in * budget / need)


def sampled_note(name: str, count: int, n: int, sample: int, max_fd: int,
                 flops: int, others: str, projections: int) -> str:
    """What a sampled input's finite differences covered, and why it was sampled."""
    capped = f", capped at {count:,} columns: at most {MAX_STORED_ENTRIES:,} Jacobian " \
             f"entries are kept, {MAX_DENSE_WORK:,.0f} elements evaluated and " \
             f"{MAX_DENSE_FLOPS:.0e} floating-point operations spent on all inputs (one " \
             f"evaluation performs {flops:,})" if count < min(sample, n) else ""
    return (f"finite differences estimated {count:,} of {n:,} elements of {name} (a seeded "
            f"sample, --sample {sample:,}{capped}; an input past --max-fd {max_fd:,} elements, "
            f"or whose Jacobian columns would hold more than {MAX_STORED_ENTRIES:,} entries, is "
            f"sampled); {others}and {projections} random projections cover all of them")
