"""The expression language on PyTorch's own op database (OpInfo): each op with autograd spelled
the way torch users write it (`torch.sin(a)`, `F.linear(a, b, c)`, `torch.linalg.norm(a,
ord=2)`, `a.double()`), on OpInfo's own float64 samples, the tensors that require grad as
inputs, integer and mask tensors as data, everything else written into the text. One row per
op, then a summary: accepted (gradscope builds it), agreeing (the three engines: autograd, the
symbolic column and finite differences), refused (with gradscope's reason) and failing.

    python benchmarks/spelled.py                     # every op, 2 samples each
    python benchmarks/spelled.py --stride 8          # a stratified eighth
    python benchmarks/spelled.py --ops 'linear|pad' --samples 4 --verbose

Needs numpy and expecttest (torch's testing internals import them; both in the `test`
extra). Outcomes are asserted by tests/e2e/test_spelled.py; timings never are."""

from __future__ import annotations

import argparse
import json
import math
import sys
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import gradscope
from benchmarks.opinfo import _name, checkable_ops
from gradscope.errors import GradscopeError

NAMES = "abcdefghijklmnopqrstuvwxyz"
MAX_ELEMENTS = 4096  # samples larger than this (all inputs together) are left out: CI time


@dataclass
class Spelled:
    """One sample as a user writes it: the text, the inputs and the data."""

    text: str
    at: dict[str, torch.Tensor] = field(default_factory=dict)
    const: dict[str, torch.Tensor] = field(default_factory=dict)
    # OpInfo checks masked ops with the masked-out outputs (inf, NaN) set aside: so does
    # gradscope with allow_nan
    allow_nan: bool = False


@dataclass
class Row:
    op: str
    text: str
    # "agree", "refused", "fails", "error", "unspellable", or "torch-known": gradscope fails
    # an op whose gradcheck OpInfo itself skips or expects to fail (torch knows it is wrong)
    outcome: str
    detail: str = ""


class Unspellable(Exception):
    """The sample has something a torch user cannot write in one line (a dtype object, a
    callable): left out, counted."""


class _Writer:
    """Writes one sample's values into expression text, naming its tensors."""

    def __init__(self) -> None:
        self.spelled = Spelled("")

    def value(self, x: Any) -> str:
        if isinstance(x, torch.Tensor):
            return self._tensor(x)
        if isinstance(x, bool) or x is None or isinstance(x, str):
            return repr(x)
        if isinstance(x, int):
            return str(x)
        if isinstance(x, float):
            return ("inf" if x > 0 else "-inf") if math.isinf(x) else repr(x)
        if isinstance(x, torch.Size):
            return repr(tuple(x))
        if isinstance(x, list | tuple):
            inner = ", ".join(self.value(v) for v in x)
            return f"[{inner}]" if isinstance(x, list) else f"({inner}{',' if len(x) == 1 else ''})"
        raise Unspellable(type(x).__name__)

    def _tensor(self, x: torch.Tensor) -> str:
        name = NAMES[len(self.spelled.at) + len(self.spelled.const)]
        if x.requires_grad and x.is_floating_point():
            self.spelled.at[name] = x.detach().clone()
        else:
            self.spelled.const[name] = x.detach().clone()
        return name


def _callee(op: Any, first: str) -> tuple[str, bool]:
    """How users call the op: `torch.sin(`, `F.linear(`, `torch.linalg.norm(`, or a method
    on the first argument; and whether it is a method."""
    name = op.name
    if name.startswith("nn.functional."):
        return f"F.{name.removeprefix('nn.functional.')}(", False
    head, _, tail = name.rpartition(".")
    module = torch
    for part in head.split(".") if head else []:
        module = getattr(module, part, None)
    if module is not None and callable(getattr(module, tail, None)) \
            and not isinstance(getattr(module, tail), torch.dtype):
        return f"torch.{name}(", False
    if not callable(getattr(torch.Tensor, name, None)) and hasattr(torch.Tensor, name):
        return f"{first}.{name}", True  # an attribute: x.T, x.mH
    if hasattr(torch.Tensor, name):
        return f"{first}.{name}(", True
    raise Unspellable(f"no torch spelling for {name}")


def spell(op: Any, sample: Any) -> Spelled:
    """One OpInfo sample as expression text (Unspellable where it cannot be written)."""
    if op.name.startswith("__"):
        raise Unspellable("a reflected operator (spelled with its symbol by users)")
    writer = _Writer()
    inp = sample.input
    first = writer.value(list(inp) if isinstance(inp, tuple) else inp)
    wrapper = getattr(op.gradcheck_wrapper, "__name__", "")
    if wrapper == "gradcheck_wrapper_hermitian_input":  # as OpInfo checks it: A + A^H
        first = f"({first} + {first}.mH)"
    elif wrapper.startswith("gradcheck_wrapper_") and "masked" not in wrapper:
        raise Unspellable(f"checked by OpInfo through {wrapper}")
    callee, method = _callee(op, first)
    args = [writer.value(a) for a in sample.args]
    kwargs = [f"{k}={writer.value(v)}" for k, v in sample.kwargs.items()]
    parts = ([] if method else [first]) + args + kwargs
    if op.name.endswith("polygamma"):  # OpInfo's wrapper takes (x, n); torch's is (n, x)
        parts[:2] = parts[1::-1]
    text = callee + (", ".join(parts) + ")" if callee.endswith("(") else "")
    out = op(sample.input, *sample.args, **sample.kwargs)
    if hasattr(out, "values") and isinstance(out, tuple):  # (values, indices): as users do
        text += ".values"
    elif isinstance(out, tuple | list):
        text += "[0]"
    writer.spelled.text = text
    writer.spelled.allow_nan = "masked" in wrapper
    if not writer.spelled.at:
        raise Unspellable("no input requires grad")
    if any(t.numel() == 0 for t in writer.spelled.at.values()):
        raise Empty("an empty input (gradscope refuses those: nothing to check)")
    if sum(t.numel() for t in writer.spelled.at.values()) > MAX_ELEMENTS:
        raise Unspellable("larger than this benchmark checks")
    return writer.spelled


class Empty(Unspellable):
    """A sample with an empty input: skipped, the next one taken."""


def torch_knows(op: Any) -> bool:
    """OpInfo itself skips or expects to fail this op's gradcheck on CPU in float64: its
    gradient is known to torch to be wrong or undefined on these samples."""
    for info in [*(op.decorators or ()), *(getattr(op, "skips", ()) or ())]:
        if getattr(info, "cls_name", None) == "TestBwdGradients" and \
                info.test_name == "test_fn_grad" and info.device_type in (None, "cpu") and \
                (info.dtypes is None or torch.float64 in info.dtypes):
            return True
    return False


def samples(op: Any) -> Iterator[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield from op.sample_inputs("cpu", torch.float64, requires_grad=True)


def judge(op: Any, count: int) -> Row:
    """The op's first `count` samples with no empty input: agree only if every spelled one is
    accepted and all three engines agree on it."""
    name = _name(op)
    rows: list[Row] = []
    for sample in samples(op):
        if len(rows) >= count:
            break
        try:
            spelled = spell(op, sample)
        except Empty:
            continue
        except Unspellable as exc:
            rows.append(Row(name, "", "unspellable", str(exc)))
            continue
        except Exception as exc:  # torch itself rejects the sample
            rows.append(Row(name, "", "unspellable", f"torch: {exc}"[:160]))
            continue
        rows.append(_checked(name, spelled))
    if not rows:
        return Row(name, "", "unspellable", "no samples")
    if torch_knows(op):  # gradscope's failure there is torch's own, known one: caught
        rows = [Row(r.op, r.text, "torch-known", r.detail) if r.outcome == "fails" else r
                for r in rows]
    # the worst spelled one speaks for the op
    for outcome in ("error", "fails", "refused", "torch-known"):
        bad = next((r for r in rows if r.outcome == outcome), None)
        if bad is not None:
            return bad
    return next((r for r in rows if r.outcome == "agree"), rows[0])


def _checked(name: str, spelled: Spelled) -> Row:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            report = gradscope.check(spelled.text, at=spelled.at, const=spelled.const,
                                     allow_nan=spelled.allow_nan)
    except GradscopeError as exc:
        return Row(name, spelled.text, "refused", str(exc).splitlines()[0][:200])
    except Exception as exc:  # gradscope's own failure: always a defect
        return Row(name, spelled.text, "error", f"{type(exc).__name__}: {exc}"[:200])
    if not report.passed:
        said = "; ".join(f"{f.kind} {f.subject} {f.detail}" for f in report.failures)
        return Row(name, spelled.text, "fails", said[:200])
    missing = [i.name for i in report.inputs if i.symbolic is None]
    if missing:
        return Row(name, spelled.text, "fails", f"no symbolic column for {', '.join(missing)}")
    return Row(name, spelled.text, "agree")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="a regular expression on op names")
    parser.add_argument("--stride", type=int, default=1)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--verbose", action="store_true", help="one JSON row per op")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    rows = [judge(op, args.samples) for op in checkable_ops(args.ops, args.stride)]
    if args.verbose:
        for row in rows:
            print(json.dumps(asdict(row)))
    counts = Counter(r.outcome for r in rows)
    print(f"{len(rows)} ops: " + ", ".join(f"{k} {v}" for k, v in counts.most_common()))
    for row in rows:
        if row.outcome in ("error", "fails"):
            print(f"  {row.outcome:7} {row.op}: {row.text[:70]} — {row.detail[:120]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
