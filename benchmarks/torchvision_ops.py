"""torchvision's region ops (dispatcher ops whose backward torchvision registers with
`torch.library.register_autograd`) through torch's gradcheck and gradscope's drop-in, called the
way torchvision's own test_ops.py calls them (`gradcheck(func, (x,))` on a closure over fixed
boxes, contiguous and transposed inputs, and a TorchScript-compiled twin) — then with a planted
bug in each op's registered backward: scaled, sign-flipped, rolled one step along the width.

Prints, per op and case: whether each tool passes, the seconds each took (the drop-in ÷ torch's
gradcheck), and for a planted bug whether gradscope names the op's registered backward, at this
file's line, as the culprit. The floor: what torch's gradcheck passes gradscope passes; what it
fails gradscope fails, naming the backward.

torchvision needs a torch of its own (PyPI's torchvision does not import beside the CPU build of
torch 2.13 this project is tested with), so run it from a virtual environment of its own:

    python -m venv /tmp/tv && /tmp/tv/bin/pip install torch==2.14.1 torchvision==0.29.1
    /tmp/tv/bin/pip install -e .          # gradscope, into that environment
    /tmp/tv/bin/python benchmarks/torchvision_ops.py [--seeds 3] [--threads 2]

Timings are printed, never asserted."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

try:
    import torchvision
    from torchvision import _autograd_registrations as registered
    from torchvision import ops
except ImportError as exc:  # pragma: no cover - depends on the environment
    sys.exit(f"torchvision_ops.py: torchvision is not importable here ({exc}); see the "
             "docstring for an environment that has it")

import gradscope

POOL = 2
ROIS = [[0, 0, 0, 4, 4], [0, 0, 2, 3, 4], [0, 2, 2, 4, 4]]  # test_ops.py's boxes (xyxy)


@dataclass(frozen=True)
class Op:
    name: str  # torchvision::NAME
    call: Callable[..., torch.Tensor]  # (x, rois) -> output, as test_ops.py's func calls it
    channels: int  # the input's channels
    setup: Callable  # the registered setup_context
    backward: Callable  # the registered backward


OPS = (
    Op("roi_align", lambda x, r: ops.roi_align(x, r, POOL, 1.0, 1), 2 * POOL * POOL,
       registered._roi_align_setup_context, registered._roi_align_backward),
    Op("roi_pool", lambda x, r: ops.roi_pool(x, r, POOL, 1.0), 2 * POOL * POOL,
       registered._roi_pool_setup_context, registered._roi_pool_backward),
    Op("ps_roi_align", lambda x, r: ops.ps_roi_align(x, r, POOL, 1.0, 1), 2 * POOL * POOL,
       registered._ps_roi_align_setup_context, registered._ps_roi_align_backward),
    Op("ps_roi_pool", lambda x, r: ops.ps_roi_pool(x, r, POOL, 1.0), 2 * POOL * POOL,
       registered._ps_roi_pool_setup_context, registered._ps_roi_pool_backward),
)

# planted bugs: what each does to the input's gradient the registered backward returns
BUGS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "scaled 1.5x": lambda g: g * 1.5,
    "sign flipped": lambda g: -g,
    "rolled along the width": lambda g: g.roll(1, dims=-1),
}


def _planted(op: Op, bug: Callable[[torch.Tensor], torch.Tensor]) -> Callable:
    def wrong_backward(ctx, *grads):
        out = op.backward(ctx, *grads)
        return (bug(out[0]), *out[1:])

    return wrong_backward


def _register(op: Op, backward: Callable) -> None:
    torch.library.register_autograd(f"torchvision::{op.name}", backward,
                                    setup_context=op.setup)


def _timed(check: Callable[..., object], func: Callable, x: torch.Tensor, **kw: object
           ) -> tuple[bool | str, float]:
    """check(func, (x,)): True, False (torch's gradcheck told not to raise), or gradscope's
    first line (or what crashed), and its seconds."""
    tic = time.perf_counter()
    try:
        result: bool | str = bool(check(func, (x,), **kw))
    except gradscope.GradcheckError as exc:
        result = str(exc).splitlines()[0]
    except Exception as exc:  # torch's GradcheckError, or a crash
        name = type(exc).__name__
        result = "fails" if name == "GradcheckError" else f"crash: {name}: {exc}"[:160]
    return result, time.perf_counter() - tic


def _inputs(op: Op, seed: int, contiguous: bool) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    x = torch.rand(1, op.channels, 5, 5, dtype=torch.float64, requires_grad=True)
    if not contiguous:
        x = x.permute(0, 1, 3, 2)
    return x, torch.tensor(ROIS, dtype=torch.float64)


def _closure(op: Op, rois: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    def func(z: torch.Tensor) -> torch.Tensor:  # test_ops.py's `func`
        return op.call(z, rois)

    return func


def _cases(op: Op, seeds: int):
    for seed in range(seeds):
        for contiguous in (True, False):
            x, rois = _inputs(op, seed, contiguous)
            label = f"seed {seed}, {'contiguous' if contiguous else 'transposed'}"
            yield label, _closure(op, rois), x
    scripted = torch.jit.script(getattr(ops, op.name))
    x, rois = _inputs(op, 0, True)
    if op.name.endswith("align"):
        yield "scripted", (lambda z: scripted(z, rois, POOL, 1.0, 1)), x
    else:
        yield "scripted", (lambda z: scripted(z, rois, POOL, 1.0)), x


def run(seeds: int) -> list[dict]:
    rows = []
    for op in OPS:
        for label, func, x in _cases(op, seeds):
            theirs, t_s = _timed(torch.autograd.gradcheck, func, x)
            ours, g_s = _timed(gradscope.gradcheck, func, x)
            rows.append({"op": op.name, "case": label, "bug": "", "torch": theirs,
                         "gradscope": ours, "torch s": t_s, "gradscope s": g_s})
        x, rois = _inputs(op, 0, True)
        func = _closure(op, rois)
        for bug_name, bug in BUGS.items():
            _register(op, _planted(op, bug))
            try:
                theirs, t_s = _timed(torch.autograd.gradcheck, func, x, raise_exception=False)
                ours, g_s = _timed(gradscope.gradcheck, func, x)
            finally:
                _register(op, op.backward)
            named = isinstance(ours, str) and \
                f"custom op torchvision::{op.name} (torchvision_ops.py:" in ours
            rows.append({"op": op.name, "case": "seed 0", "bug": bug_name, "torch": theirs,
                         "gradscope": ours, "named": named, "torch s": t_s,
                         "gradscope s": g_s})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"torch {torch.__version__}, torchvision {torchvision.__version__}, "
          f"{args.threads} thread(s)")
    rows = run(args.seeds)
    floor = True
    for row in rows:
        ours_pass = row["gradscope"] is True
        if row["bug"]:
            ok = not ours_pass and row["named"] and row["torch"] is False
            verdict = "caught, culprit named" if ok else "MISSED OR UNNAMED"
        else:
            ok = ours_pass or row["torch"] is not True
            verdict = "both pass" if ours_pass and row["torch"] is True else \
                "FALSE ALARM" if row["torch"] is True else "torch fails too"
        floor &= ok
        what = f"{row['op']:<13} {row['case']:<22} {row['bug'] or 'correct':<24}"
        print(f"{what} {verdict:<22} torch {row['torch s']:6.2f} s  gradscope "
              f"{row['gradscope s']:6.2f} s  ({row['gradscope s'] / row['torch s']:.2f}x)")
        if not ok:
            print(f"    gradscope said: {row['gradscope']}")
    passing = [r for r in rows if not r["bug"] and r["gradscope"] is True]
    if passing:
        total_t = sum(r["torch s"] for r in passing)
        total_g = sum(r["gradscope s"] for r in passing)
        print(f"calls both pass: {len(passing)}, torch {total_t:.1f} s, gradscope "
              f"{total_g:.1f} s, ratio {total_g / total_t:.2f}x")
    print("floor held" if floor else "FLOOR BROKEN")
    sys.exit(0 if floor else 1)


if __name__ == "__main__":
    main()
