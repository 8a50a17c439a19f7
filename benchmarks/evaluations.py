"""Calls of the user's code per check on implicit-function targets (an internal solver: a loop
on the values, which vmap cannot batch), gradscope beside torch's gradcheck (slow and fast)
on the same call, counted by the target itself, and gradscope's own count in the report
(`timings["calls.total"]`).

    python benchmarks/evaluations.py [--n 12]

Prints one JSON row per target; timings are never asserted anywhere."""

from __future__ import annotations

import argparse
import json

import torch

CALLS = [0]


def cube_root_solve(x: torch.Tensor) -> torch.Tensor:
    """y with y**3 + y = x, by Newton's method; one differentiable step at the solution."""
    CALLS[0] += 1
    y = x.detach().clone()
    for _ in range(50):
        step = (y**3 + y - x.detach()) / (3 * y**2 + 1)
        y = y - step
        if float(step.abs().max()) < 1e-13:
            break
    y = y.detach()
    return y - (y**3 + y - x) / (3 * y**2 + 1)


def minimise(a: torch.Tensor) -> torch.Tensor:
    """argmin over z of sum((z - a)**4 + z**2), by Newton's method to convergence."""
    CALLS[0] += 1
    z = a.detach().clone()
    for _ in range(200):
        g = 4 * (z - a.detach())**3 + 2 * z
        z = z - g / (12 * (z - a.detach())**2 + 2)
        if float(g.abs().max()) < 1e-12:
            break
    z = z.detach()
    return z - (4 * (z - a)**3 + 2 * z) / (12 * (z - a.detach())**2 + 2)


def _counted(run: object) -> int:
    CALLS[0] = 0
    run()  # type: ignore[operator]
    return CALLS[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=12)
    args = parser.parse_args()
    for fn in (cube_root_solve, minimise):
        print(json.dumps(_row(fn, args.n)))


def _row(fn: object, n: int) -> dict:
    import gradscope

    x = torch.linspace(-2, 3, n, dtype=torch.float64).requires_grad_()
    reports: list = []
    row = {"target": fn.__name__, "elements": n,  # type: ignore[attr-defined]
           "gradcheck_slow": _counted(lambda: torch.autograd.gradcheck(fn, (x,))),
           "gradcheck_fast": _counted(lambda: torch.autograd.gradcheck(fn, (x,),
                                                                        fast_mode=True)),
           "gradscope_check": _counted(lambda: reports.append(gradscope.check(fn, x))),
           "gradscope_dropin": _counted(lambda: gradscope.gradcheck(fn, (x,)))}
    return {**row, "reported": reports[0].timings.get("calls.total"),
            "passed": reports[0].passed}

if __name__ == "__main__":
    main()
