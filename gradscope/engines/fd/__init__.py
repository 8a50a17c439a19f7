"""The finite-difference engine: `FiniteDifferences` (engine.py) composed of the point it works
around (point.py), the step policy (policy.py), the stencil (stencil.py), a batcher of perturbed
evaluations (batcher.py), an estimator per input structure (elementwise.py, columns.py), a
sampler (sampler.py) and a prober (probe.py), returning immutable `Estimate`s (result.py);
budget.py decides which inputs are sampled.

The names are loaded on first use: `policy` (the step's numbers) is read by the options, which
`gradscope --help` needs without torch."""

from __future__ import annotations

from typing import Any

_FROM = {"FiniteDifferences": "engine", "ColumnEstimate": "result", "Directional": "result",
         "ElementwiseEstimate": "result", "Estimate": "result"}

__all__ = sorted(_FROM)


def __getattr__(name: str) -> Any:
    if name in _FROM:
        import importlib

        return getattr(importlib.import_module(f"gradscope.engines.fd.{_FROM[name]}"), name)
    raise AttributeError(f"module 'gradscope.engines.fd' has no attribute {name!r}")
