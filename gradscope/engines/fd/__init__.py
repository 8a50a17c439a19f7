"""The finite-difference engine: `FiniteDifferences` (engine.py) over the stencil (stencil.py),
batched per element (elementwise.py) or per column (dense.py), returning `Estimate`s
(result.py); budget.py decides which inputs are sampled."""

from gradscope.engines.fd.engine import FiniteDifferences
from gradscope.engines.fd.result import Directional, Estimate

__all__ = ["Directional", "Estimate", "FiniteDifferences"]
