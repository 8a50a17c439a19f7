"""gradscope: autograd, sympy and finite differences side by side, per element.

`import gradscope` stays cheap: torch and sympy are imported on first use of a command.
"""

from __future__ import annotations

import warnings
from typing import Any

from gradscope._version import __version__
from gradscope.errors import GradscopeError, TargetError, UsageError
from gradscope.markers import surrogate

# torch warns on every start when NumPy is absent; gradscope never needs NumPy, so the warning
# would only be noise on stderr in a fresh environment.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy", category=UserWarning)

__all__ = [
    "GradcheckError",
    "GradscopeError",
    "GradscopeWarning",
    "Report",
    "TargetError",
    "UsageError",
    "__version__",
    "check",
    "gradcheck",
    "gradgradcheck",
    "graph",
    "jacobian",
    "jvp",
    "run_config",
    "surrogate",
    "sweep",
    "testing",
    "vjp",
]

_API = {"check", "vjp", "jvp", "jacobian", "graph", "sweep", "run_config", "testing"}
_DROP_IN = {"gradcheck", "gradgradcheck", "GradcheckError", "GradscopeWarning"}


def __dir__() -> list[str]:
    """The public names (the API is imported lazily, so a plain dir() would not list it)."""
    return sorted(__all__)


def __getattr__(name: str) -> Any:
    # Lazy so that `gradscope --help` and `import gradscope` never pull in torch.
    if name == "testing":
        from gradscope import testing

        return testing
    if name in _DROP_IN:  # subclasses torch's GradcheckError: torch is imported here
        from gradscope.testing import gradcheck

        return getattr(gradcheck, name)
    if name == "Report":  # (the report model imports no torch)
        from gradscope.report.model import Report

        return Report
    if name == "run_config":
        from gradscope.suite.run import run_config

        return run_config
    if name in _API:
        from gradscope import api

        return getattr(api, name)
    raise AttributeError(f"module 'gradscope' has no attribute {name!r}")
