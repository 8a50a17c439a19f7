"""Custom gradients checked in place, as evidence of every run of user code: one watched forward
and backward finds each custom `autograd.Function` call on the path to the output, with the
arguments it received and the gradient it got from above; each call's backward is compared
per element with finite differences of that Function's own forward (its cost is the op's, not
the model's: diagnose/culprits.py); each gradient hook registered in the forward is checked for
whether it changed the gradient it was given (diagnose/hooks.py). The verdict names each class
and hook with file and line."""

from __future__ import annotations

from gradscope.diagnose.culprits import ClassCheck, check_in_place
from gradscope.diagnose.hooks import HookCheck
from gradscope.engines.fd.policy import DEFAULT_EPS
from gradscope.runner.backward import Backward
from gradscope.runner.prepare import Prepared
from gradscope.verdict.tolerance import Tolerance


def in_place(prepared: Prepared, back: Backward, tol: Tolerance, eps: float | None
             ) -> tuple[ClassCheck | HookCheck, ...]:
    """Each custom Function class and gradient hook on the run, checked call by call (none
    for a target that is itself one Function: its own table is that check)."""
    target, options = prepared.target, prepared.options
    if not target.runs_user_code or target.own_function is not None or back.grads is None:
        return ()
    if getattr(back.engine.output, "grad_fn", None) is None:
        return ()
    try:
        return tuple(check_in_place(target.forward, prepared.bound.cast, back.upstream, tol,
                                   eps or options.eps or DEFAULT_EPS, options.max_fd,
                                   options.sample, options.seed))
    except Exception:  # the user's code refused a second watched run: said by the verdict
        return ()


__all__ = ["ClassCheck", "HookCheck", "in_place"]
