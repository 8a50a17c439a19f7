"""A run mode: a way gradscope calls the user's code other than the plain one (an ordinary call
in one process, in the check's dtype, eagerly) — compiled by torch.compile, under autocast,
across ranks, or only ever the ordinary way. Each mode is one module in `targets/` with a
`MODE` and its line in `targets.MODES`; it declares the option that asks for it, what it
cannot be combined with and what means nothing without it, and it either wraps the target
(`targets/wrapper.py`: the capabilities it changes) or builds a target of its own. The stages
(evidence/, runner/) ask the target what to call and never which mode runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from gradscope.errors import UsageError
from gradscope.options import SPECS, Options

if TYPE_CHECKING:
    from gradscope.inputs.bind import Bound
    from gradscope.report.model import Report
    from gradscope.targets.base import Target


class Mode:
    """One run mode; subclasses set the class attributes and override what they do."""

    option: ClassVar[str] = ""  # the Options field that asks for it
    # other modes' options it cannot be combined with, and why it runs alone (said to the user)
    excludes: ClassVar[tuple[str, ...]] = ()
    alone: ClassVar[str] = ""
    # options that mean nothing without this mode, and what the mode is for (said to the user)
    needs: ClassVar[tuple[str, ...]] = ()
    purpose: ClassVar[str] = ""
    # why it checks first-order gradients only ("": --order 2 is fine)
    first_order: ClassVar[str] = ""
    # whether a model too large for a float64 check may be checked in its own dtype under it
    fits: ClassVar[bool] = True
    builds: ClassVar[bool] = False  # it builds its own target and binding (`build`)
    runs: ClassVar[bool] = False  # it runs the whole check itself, elsewhere too (`run`)

    @property
    def flag(self) -> str:
        return SPECS[self.option].flag

    def asked(self, options: Options) -> bool:
        value = getattr(options, self.option)
        return value is not None and value is not False and value != 0

    def adjusted(self, options: Options) -> Options:
        """The options as the mode runs them; a UsageError where they do not fit it."""
        return options

    def wanted_by(self, target: Target) -> str | None:
        """Why `target` itself needs this mode whatever the options say (said in a note), or
        None."""
        return None

    def asking(self, options: Options) -> Options:
        """`options` asking for this mode (where the target wants it)."""
        return options.updated(**{self.option: True})

    def build(self, request: Any, options: Options) -> tuple[Target, Bound]:
        """The target and its binding, where the mode makes them (`builds`)."""
        raise NotImplementedError

    def wrap(self, target: Target, options: Options) -> Target:
        """`target` as the mode calls it."""
        return target

    def run(self, request: Any, here: Callable[[Any], Report]) -> Report:
        """The check's report, where the mode runs it (`runs`): `here` runs its stages in this
        process (the ranks' mode runs them on rank 0, every rank taking part)."""
        return here(request)


def running(modes: Sequence[Mode], options: Options) -> Mode | None:
    """The mode the options ask for that runs the whole check itself, if any."""
    return next((m for m in modes if m.runs and m.asked(options)), None)


def asked(modes: Sequence[Mode], options: Options) -> list[Mode]:
    """The modes the options ask for, checked against each other and against the options
    that need a mode not asked; each mode's adjustments applied (in `modes` order)."""
    on = [m for m in modes if m.asked(options)]
    for mode in modes:
        if mode in on:
            continue
        for name in mode.needs:
            if getattr(options, name):
                metavar = SPECS[mode.option].metavar
                raise UsageError(f"{SPECS[name].flag} is for {mode.purpose}: give "
                                 f"{mode.flag}{' ' + metavar if metavar else ''} too")
    for mode in on:
        if mode.first_order and options.order == 2:
            raise UsageError(f"{mode.flag} checks first-order gradients ({mode.first_order}): "
                             "leave out --order 2")
        for other in on:
            if other is not mode and other.option in mode.excludes:
                raise UsageError(f"{mode.flag} is not combined with {other.flag}: "
                                 f"{mode.alone}")
    return on


def adjusted(on: Sequence[Mode], options: Options) -> Options:
    for mode in on:
        options = mode.adjusted(options)
    return options
