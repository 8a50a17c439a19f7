"""The errors a user can see, typed and carrying their data: bad usage (exit 2) and the user's
own code failing (exit 3). gradscope reads these fields, never its own message text: a caller
that wants other words (the API names keywords where the CLI names flags) builds them from the
fields."""

from __future__ import annotations

from collections.abc import Sequence

# Words of torch's and Python's own error messages that say an error is about shapes (read
# from the *original* exception's text, where the error is made: never from ours).
SHAPE_WORDS = ("shape", "size", "dimension", "broadcast", "mat1 and mat2", "expected input")


def mentions_shapes(text: str) -> bool:
    """Whether an error text from torch or the user's code is about shapes."""
    lower = text.lower()
    return any(word in lower for word in SHAPE_WORDS)


class GradscopeError(Exception):
    """Base of every error gradscope raises on purpose. `about_shapes`: the underlying failure
    was about tensor shapes (the runner then says which shapes were nobody's choice)."""

    exit_code = 2
    about_shapes = False

    def with_hint(self, hint: str) -> GradscopeError:
        """The same error (same class, same data) with `hint` as one more line."""
        again = self.__class__.__new__(self.__class__)
        again.__dict__.update(self.__dict__)
        again.args = (f"{self}\n{hint}",)
        return again

    def __reduce__(self) -> tuple:
        # pickled by its data (worker processes send errors back), whatever __init__ takes
        return _rebuilt, (self.__class__, self.args, dict(self.__dict__))


def _rebuilt(cls: type, args: tuple, data: dict) -> GradscopeError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(data)
    return error


class UsageError(GradscopeError, ValueError):
    """Bad usage or input: the message says what was wrong and what is allowed."""

    exit_code = 2


class NothingSelected(GradscopeError):
    """A selection (`gradscope run -k`, `--lf`, `--shard`) left no check to run: exit 5, as
    pytest's "no tests collected"."""

    exit_code = 5


class UnknownName(UsageError):
    """An option names something the target does not have (`--at z` where the inputs are x
    and y): `option`, the `name` given and the names the target `known`s."""

    def __init__(self, option: str, name: str, known: Sequence[str], also: str = "") -> None:
        self.option, self.name, self.known = option, name, tuple(known)
        listed = ", ".join(self.known) or "none (every parameter is given by --arg)"
        super().__init__(f"{option} names `{name}`, which is not an input of the target{also}; "
                         f"inputs are: {listed}")


class EvaluationError(UsageError):
    """An expression could not be computed on these inputs (torch refused an op): where, on
    which shapes, and torch's own first line (always about shapes: it names them)."""

    def __init__(self, where: str, shapes: str, detail: str) -> None:
        self.where, self.shapes, self.detail = where, shapes, detail
        self.about_shapes = True
        super().__init__(f"cannot compute `{where}` on shapes {shapes}: {detail}")


class TargetError(GradscopeError, RuntimeError):
    """The user's own code raised (import, forward or backward) or left: `during` what, the
    error's type name and first line (`error`, `detail`), and the user's own frames."""

    exit_code = 3

    def __init__(self, message: str, *, during: str = "", error: str = "", detail: str = "",
                 frames: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.during, self.error, self.detail = during, error, detail
        self.frames = tuple(frames)
        self.about_shapes = mentions_shapes(detail)


class Stopped(SystemExit):
    """gradscope itself was told to stop (SIGTERM): it unwinds like an exit with 128 + the
    signal's number, and is never mistaken for the user's code leaving through sys.exit."""

    def __init__(self, code: int, why: str = "") -> None:
        super().__init__(code)
        self.why = why

    def reason(self) -> str:
        """One line saying why the run ended."""
        if self.why:
            return self.why
        import signal

        number = int(self.code or 0) - 128
        name = signal.Signals(number).name if number in signal.Signals._value2member_map_ \
            else f"signal {number}"
        return f"stopped by {name} before the run finished (exit {self.code})"


class TimedOut(Stopped):
    """A check ran past its --timeout: stopped like a signal, exit 3 (as `gradscope run`'s
    checks that pass their timeout)."""

    def __init__(self, seconds: float) -> None:
        super().__init__(3, f"error: the check did not finish within --timeout {seconds:g} s "
                            "and was stopped (no report was written)")
