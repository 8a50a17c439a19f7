"""The drop-in beside torch's gradcheck on PyTorch's own op database (OpInfo), called the way
torch's gradient tests call it (`TestGradients._check_helper`: the tensors that require grad
as gradcheck's inputs, check_batched_grad per op, check_grad_dtypes, check_undefined_grad,
the op's nondet_tol), in fast and slow mode, in one process. One JSON row per call, then a
summary: the calls where the two disagree, and gradscope's time over torch's on the calls both
pass.

    python benchmarks/opinfo.py                       # every op, 3 samples, both modes
    python benchmarks/opinfo.py --stride 10           # a stratified tenth of the ops
    python benchmarks/opinfo.py --ops softmax --mode fast --threads 1

Needs numpy and expecttest (torch's testing internals import them; both in the `test`
extra). Outcomes are asserted by tests/e2e/test_opinfo.py; timings never are."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from itertools import chain
from typing import Any

import torch

TORCH_GRADCHECK = sys.modules["torch.autograd.gradcheck"].gradcheck
# slow mode builds the dense Jacobian (inputs × outputs entries): past this many, torch's
# gradcheck runs for minutes and tens of GB (grid_sampler_3d's third sample), so the call is
# left out of both sides and counted
MAX_SLOW_JACOBIAN = 20_000_000


@dataclass
class Outcome:
    """One op/sample/mode call through both checkers."""

    op: str
    sample: int
    mode: str
    torch: str  # "pass", "fail: …", "error: …"
    gradscope: str
    torch_s: float
    gradscope_s: float
    delegated: str = ""  # why gradscope handed the call to torch's gradcheck, if it did
    warned: bool = False  # passed with a GradscopeWarning (inside the call's tolerances)
    matters: bool = True  # --inject: the scaled output's gradient is not zero (a bug to see)

    @property
    def diverges(self) -> bool:
        """torch passes and gradscope does not (the parity the drop-in owes)."""
        return self.torch == "pass" and self.gradscope != "pass"


def checkable_ops(pattern: str | None = None, stride: int = 1) -> list[Any]:
    """OpInfo's ops with autograd and a float64 CPU backward, sorted by name, every
    `stride`-th (a stratified sample: the database is grouped by kind)."""
    from torch.testing._internal.common_methods_invocations import op_db

    ops = sorted((op for op in op_db if op.supports_autograd
                  and torch.float64 in op.supported_backward_dtypes("cpu")),
                 key=lambda op: (op.name, op.variant_test_name))
    if pattern:
        ops = [op for op in ops if re.search(pattern, _name(op))]
    return ops[::stride]


def _name(op: Any) -> str:
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _recompose(inputs: tuple[torch.Tensor, ...], value: Any, k: int) -> tuple[Any, int]:
    """`value` with its tensors that require grad replaced by inputs[k:], as torch's helper."""
    if isinstance(value, list | tuple) and value and all(isinstance(x, torch.Tensor)
                                                         for x in value):
        out = []
        for x in value:
            if x.requires_grad:
                out.append(inputs[k])
                k += 1
            else:
                out.append(x)
        return out, k
    if isinstance(value, torch.Tensor) and value.requires_grad:
        return inputs[k], k + 1
    return value, k


def calls(op: Any, samples: int, small: bool = False
          ) -> Iterator[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]]:
    """(fn, gradcheck inputs, gradcheck keywords) per sample, as torch's gradient tests
    (`small`: the small inputs torch's tests use in slow mode)."""
    variant = op.get_op()
    for sample in list(op.sample_inputs("cpu", torch.float64, requires_grad=True,
                                        small_inputs_only=small))[:samples]:
        inp = sample.input
        if isinstance(inp, list | tuple) and all(isinstance(x, torch.Tensor) for x in inp):
            everything = chain(inp, sample.args, sample.kwargs.values())
        else:
            everything = chain((inp,), sample.args, sample.kwargs.values())
        args = tuple(x for x in everything if isinstance(x, torch.Tensor) and x.requires_grad)
        if not args:
            continue

        def fn(*inputs: torch.Tensor, sample: Any = sample) -> Any:
            first, k = _recompose(inputs, sample.input, 0)
            positional = [first]
            for x in sample.args:
                value, k = _recompose(inputs, x, k)
                positional.append(value)
            kwargs = {}
            for key, x in sample.kwargs.items():
                kwargs[key], k = _recompose(inputs, x, k)
            out = op.gradcheck_wrapper(variant, *positional, **kwargs)
            return sample.output_process_fn_grad(out) if sample.output_process_fn_grad \
                else out

        fn.__name__ = op.name.replace(".", "_")
        yield fn, args, {"check_batched_grad": op.check_batched_grad,
                         "check_grad_dtypes": True, "nondet_tol": op.gradcheck_nondet_tol,
                         "check_undefined_grad": True}


class _Off(torch.autograd.Function):
    """The identity whose backward is off by a factor: the injected mistake."""

    factor = 1.0

    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):  # type: ignore[no-untyped-def]
        return g * _Off.factor


def injected(fn: Callable[..., Any], factor: float) -> Callable[..., Any]:
    """fn with its first differentiable output's backward scaled by `factor`."""

    def wrong(*inputs: torch.Tensor) -> Any:
        _Off.factor = factor
        out = fn(*inputs)
        if isinstance(out, torch.Tensor):
            return _Off.apply(out) if out.requires_grad else out
        outs, done = list(out), False
        for k, o in enumerate(outs):
            if not done and isinstance(o, torch.Tensor) and o.requires_grad:
                outs[k], done = _Off.apply(o), True
        return type(out)(outs) if isinstance(out, tuple) else outs

    wrong.__name__ = getattr(fn, "__name__", "fn")
    return wrong


def _outcome(check: Callable[..., bool], fn: Callable[..., Any], args: tuple[Any, ...],
             kw: dict[str, Any]) -> tuple[str, float]:
    start = time.process_time()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = "pass" if check(fn, args, **kw) else "fail: returned False"
    except sys.modules["torch.autograd.gradcheck"].GradcheckError as exc:
        result = "fail: " + (str(exc).strip().splitlines() or [""])[0][:200]
    except Exception as exc:  # every crash is an outcome to count
        result = f"error: {type(exc).__name__}: {str(exc).strip()[:200]}"
    return result, time.process_time() - start


def run(ops: list[Any], samples: int, modes: list[str], inject: float | None = None
        ) -> Iterator[Outcome]:
    """Every op/mode/sample through torch's gradcheck, then gradscope's (slow mode on the
    small inputs torch's own slow-mode tests use)."""
    import gradscope
    from gradscope.testing.stats import STATS

    for op in ops:
        for mode in modes:
            try:
                cases = list(calls(op, samples, small=mode == "slow"))
            except Exception:  # a sample that cannot be built is not a call
                continue
            for k, (fn, args, kw) in enumerate(cases):
                if mode == "slow" and _jacobian_entries(fn, args) > MAX_SLOW_JACOBIAN:
                    yield Outcome(_name(op), k, mode, "too big", "too big", 0.0, 0.0)
                    continue
                options = {**kw, "fast_mode": mode == "fast"}
                matters = True
                if inject is not None:
                    matters = _moves(fn, args)
                    fn = injected(fn, inject)
                theirs, t_s = _outcome(TORCH_GRADCHECK, fn, args, options)
                before, warned = dict(STATS.reasons), STATS.warned
                ours, g_s = _outcome(gradscope.gradcheck, fn, args, options)
                why = [w for w, n in STATS.reasons.items() if n != before.get(w, 0)]
                yield Outcome(_name(op), k, mode, theirs, ours, t_s, g_s, "; ".join(why),
                              STATS.warned > warned, matters)


def _moves(fn: Callable[..., Any], args: tuple[Any, ...]) -> bool:
    """Whether the first differentiable output has a nonzero gradient (scaling it matters)."""
    out = fn(*args)
    outs = [out] if isinstance(out, torch.Tensor) else list(out)
    first = next((o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad), None)
    if first is None or not first.numel():
        return False
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(first.shape, generator=gen, dtype=torch.float64).to(first)
    try:
        grads = torch.autograd.grad(first, args, v, allow_unused=True)
    except RuntimeError:  # sparse layouts and the like: counted as mattering
        return True
    return any(g is not None and bool(g.to_dense().ne(0).any()) for g in grads)


def _jacobian_entries(fn: Callable[..., Any], args: tuple[Any, ...]) -> int:
    out = fn(*args)
    outs = [out] if isinstance(out, torch.Tensor) else [o for o in out
                                                         if isinstance(o, torch.Tensor)]
    return sum(a.numel() for a in args) * sum(o.numel() for o in outs)


def summary(rows: list[Outcome]) -> dict[str, Any]:
    """Counts per mode, the divergences, and time over the calls both pass."""
    out: dict[str, Any] = {"calls": len(rows),
                           "too_big": sum(r.torch == "too big" for r in rows),
                           "divergent": [asdict(r) for r in rows if r.diverges],
                           "delegated": sum(bool(r.delegated) for r in rows),
                           "warned": [asdict(r) for r in rows if r.warned],
                           # with --inject: the calls each side flags (fails, or warns)
                           "torch_flags": sum(r.torch.startswith("fail") for r in rows),
                           "matters": sum(r.matters for r in rows),
                           "gradscope_flags": sum(r.gradscope.startswith("fail") or r.warned
                                                  for r in rows),
                           "torch_fails_gradscope_passes": [
                               asdict(r) for r in rows
                               if r.torch != "pass" and r.gradscope == "pass"]}
    for mode in ("fast", "slow"):
        both = [r for r in rows if r.mode == mode and r.torch == r.gradscope == "pass"]
        t = sum(r.torch_s for r in both)
        g = sum(r.gradscope_s for r in both)
        out[mode] = {"both_pass": len(both), "torch_s": round(t, 3), "gradscope_s": round(g, 3),
                     "ratio": round(g / t, 3) if t else None}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", help="a regular expression over op names")
    parser.add_argument("--stride", type=int, default=1, help="every STRIDE-th op")
    parser.add_argument("--samples", type=int, default=3, help="samples per op")
    parser.add_argument("--mode", choices=("fast", "slow", "both"), default="both")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--quiet", action="store_true", help="the summary only")
    parser.add_argument("--inject", type=float, metavar="FACTOR",
                        help="scale every op's backward by FACTOR (1.001: a 0.1 %% bug)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    modes = ["fast", "slow"] if args.mode == "both" else [args.mode]
    rows = []
    for row in run(checkable_ops(args.ops, args.stride), args.samples, modes, args.inject):
        rows.append(row)
        if not args.quiet:
            print(json.dumps(asdict(row)), flush=True)
    print(json.dumps({"summary": summary(rows)}))


if __name__ == "__main__":
    main()
