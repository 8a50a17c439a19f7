"""Bugs planted in real libraries' custom autograd Functions, each caught or missed by
gradscope, and the culprit it names: every Function's backward is wrapped so
that the gradient it returns for one argument is scaled by 1.5, sign-flipped, or rolled one
step along its last dimension, as a slip in its source would make it. gradscope checks the
library's public call with its default inputs (drawn from the shapes given) — or the values a
Function's domain needs — at torch's gradcheck tolerances, and must fail and name the Function,
at its backward's `def`, and the argument. The right Functions are checked too: they must
pass.

    pip install --no-deps entmax==1.3 roma==1.8.0 gpytorch==1.15.2 linear_operator==0.6.1 \\
        sparsemax==0.1.9
    pip install scipy jaxtyping
    python benchmarks/planted.py [--threads 2]

Prints one row per Function and bug, then a summary. Timings are printed, never asserted."""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

import gradscope
from gradscope.usercode import backward_location


@dataclass(frozen=True)
class Case:
    """One Function of a library, reached through the library's own call."""

    library: str
    cls: Callable[[], type]  # imported when run (a library may be missing)
    call: Callable[[], Callable[..., torch.Tensor]]
    argument: str  # the backward's argument the bug is planted in (its forward's name)
    position: int  # its index among what backward returns
    shape: dict[str, tuple[int, ...]] = field(default_factory=dict)  # default inputs
    at: dict[str, str] = field(default_factory=dict)  # values a domain needs
    # the bugs that change anything: a gradient autograd sums into a one-element argument
    # (a lengthscale) is the same sum rolled
    bugs: tuple[str, ...] = ("scaled 1.5x", "sign flipped", "rolled one step")


def _entmax() -> Any:
    import entmax

    return entmax


def _gpytorch_fn() -> Any:
    import gpytorch.functions as fns

    return fns


def _rbf() -> Callable[..., torch.Tensor]:
    from gpytorch.functions import RBFCovariance
    from gpytorch.kernels.kernel import sq_dist

    x1 = torch.linspace(-1, 1, 8, dtype=torch.float64).reshape(4, 2)
    x2 = torch.linspace(-0.5, 1.5, 6, dtype=torch.float64).reshape(3, 2)

    def covariance(lengthscale: torch.Tensor) -> torch.Tensor:
        return RBFCovariance.apply(x1, x2, lengthscale, sq_dist)

    return covariance


def _matern() -> Callable[..., torch.Tensor]:
    from gpytorch.functions import MaternCovariance
    from gpytorch.kernels.kernel import dist

    x1 = torch.linspace(-1, 1, 8, dtype=torch.float64).reshape(4, 2)
    x2 = torch.linspace(-0.5, 1.5, 6, dtype=torch.float64).reshape(3, 2)

    def covariance(lengthscale: torch.Tensor) -> torch.Tensor:
        return MaternCovariance.apply(x1, x2, lengthscale, 2.5, dist)

    return covariance


def _procrustes() -> Callable[..., torch.Tensor]:
    import roma

    def rotation(M: torch.Tensor) -> torch.Tensor:
        return roma.special_procrustes(M)

    return rotation


def _sparsemax_pkg() -> Callable[..., torch.Tensor]:
    from sparsemax import Sparsemax

    layer = Sparsemax(dim=-1)

    def sparsemax(x: torch.Tensor) -> torch.Tensor:
        return layer(x)

    return sparsemax


def _entmax_call(name: str, **kw: Any) -> Callable[[], Callable[..., torch.Tensor]]:
    def made() -> Callable[..., torch.Tensor]:
        fn = getattr(_entmax(), name)

        def call(x: torch.Tensor) -> torch.Tensor:
            return fn(x, **kw)

        return call

    return made


CASES = (
    Case("entmax 1.3", lambda: _entmax().activations.SparsemaxFunction,
         _entmax_call("sparsemax", dim=-1), "X", 0, {"x": (3, 6)}),
    Case("entmax 1.3", lambda: _entmax().activations.Entmax15Function,
         _entmax_call("entmax15", dim=-1), "X", 0, {"x": (3, 6)}),
    Case("entmax 1.3", lambda: _entmax().root_finding.EntmaxBisectFunction,
         _entmax_call("entmax_bisect", alpha=1.5, dim=-1), "X", 0, {"x": (3, 6)}),
    Case("sparsemax 0.1.9", lambda: __import__("sparsemax.sparsemax").sparsemax.SparsemaxFunction,
         _sparsemax_pkg, "input", 0, {"x": (3, 6)}),
    # (roma solves 3×3 with Horn's eigenvector, larger ones with the SVD)
    Case("roma 1.8.0", lambda: __import__("roma.mappings").mappings._ProcrustesManualDerivatives,
         _procrustes, "M", 0, {"M": (2, 4, 4)}),
    Case("roma 1.8.0",
         lambda: __import__("roma.mappings").mappings._HornEigenvectorManualDerivatives,
         _procrustes, "M", 0, {"M": (2, 3, 3)}),
    Case("gpytorch 1.15.2", lambda: _gpytorch_fn().RBFCovariance, _rbf, "lengthscale", 2,
         at={"lengthscale": "[[0.7]]"}, bugs=("scaled 1.5x", "sign flipped")),
    Case("gpytorch 1.15.2", lambda: _gpytorch_fn().MaternCovariance, _matern, "lengthscale", 2,
         at={"lengthscale": "[[0.7]]"}, bugs=("scaled 1.5x", "sign flipped")),
    Case("gpytorch 1.15.2", lambda: _gpytorch_fn()._log_normal_cdf.LogNormalCDF,
         lambda: _gpytorch_fn().log_normal_cdf, "z", 0, {"x": (7,)}),
)

BUGS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "scaled 1.5x": lambda g: g * 1.5,
    "sign flipped": lambda g: -g,
    "rolled one step": lambda g: g.roll(1, dims=-1) if g.dim() else g,
}


@contextmanager
def planted(cls: type, position: int, bug: Callable[[torch.Tensor], torch.Tensor]
            ) -> Iterator[None]:
    """`cls.backward` returning `bug` of its gradient for argument `position`, restored after;
    the wrapper keeps the original as `__wrapped__`, so the backward's line is the library's
    (as a slip in its source would be)."""
    own = next(c.__dict__["backward"] for c in cls.__mro__ if "backward" in c.__dict__)
    inner = own.__func__ if isinstance(own, classmethod | staticmethod) else own

    @functools.wraps(inner)
    def backward(*args: Any) -> Any:
        result = inner(*args)
        if not isinstance(result, tuple):  # one gradient, returned bare
            return bug(result)
        out = list(result)
        out[position] = bug(out[position])
        return tuple(out)

    wrapped = classmethod(backward) if isinstance(own, classmethod) else staticmethod(backward)
    had = "backward" in cls.__dict__
    cls.backward = wrapped
    try:
        yield
    finally:
        if had:
            cls.backward = own
        else:
            delattr(cls, "backward")


def _check(case: Case) -> tuple[dict, float]:
    fn = case.call()
    tic = time.perf_counter()
    # at torch's gradcheck tolerances, as the libraries' own tests judge their Functions (a
    # rational approximation's backward may differ from its forward's slope by 1e-4)
    report = gradscope.check(fn, shape={k: ",".join(map(str, v)) for k, v in case.shape.items()},
                             at=case.at, rtol=1e-3, atol=1e-5)
    return json.loads(report.to_json()), time.perf_counter() - tic


def _culprit(report: dict) -> str:
    return next((d["summary"] or d["message"] for d in report["diagnostics"]
                 if d["kind"] == "culprit"), "")


def run() -> list[dict]:
    rows = []
    for case in CASES:
        try:
            cls = case.cls()
        except ImportError as exc:
            print(f"  skipped {case.library}: {exc}")
            continue
        label = f"{cls.__name__}.backward ({backward_location(cls)})"
        report, seconds = _check(case)
        rows.append({"library": case.library, "function": cls.__name__, "bug": "",
                     "passed": report["passed"], "culprit": _culprit(report),
                     "seconds": seconds, "ok": report["passed"]})
        for name in case.bugs:
            with planted(cls, case.position, BUGS[name]):
                report, seconds = _check(case)
            culprit = _culprit(report)
            named = culprit.startswith(f"{label}, for its argument {case.argument}")
            rows.append({"library": case.library, "function": cls.__name__, "bug": name,
                         "passed": report["passed"], "culprit": culprit, "seconds": seconds,
                         "ok": not report["passed"] and named})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows = run()
    for row in rows:
        verdict = ("passes" if row["passed"] else "FALSE ALARM") if not row["bug"] else \
            "caught, culprit named" if row["ok"] else \
            "MISSED" if row["passed"] else "caught, CULPRIT WRONG OR MISSING"
        print(f"{row['library']:<16} {row['function']:<30} {row['bug'] or 'correct':<16} "
              f"{verdict:<32} {row['seconds']:5.2f} s")
        if row["bug"] and not row["ok"]:
            print(f"    culprit: {row['culprit'] or '(none)'}")
    planted_rows = [r for r in rows if r["bug"]]
    right = [r for r in rows if not r["bug"]]
    print(f"planted bugs: {len(planted_rows)}, caught {sum(not r['passed'] for r in planted_rows)}"
          f", culprit named right {sum(r['ok'] for r in planted_rows)}; right Functions: "
          f"{len(right)}, passing {sum(r['passed'] for r in right)}")
    sys.exit(0 if all(r["ok"] for r in rows) else 1)


if __name__ == "__main__":
    main()
