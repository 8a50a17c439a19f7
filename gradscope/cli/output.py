"""Where a command's report goes: stdout (rich on a terminal, or one document) or a file written
atomically; progress bars on stderr. One path for every command's report."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TextIO

import typer

from gradscope.errors import UsageError


def check_output(path: Path | None, option: str = "--output") -> None:
    """Refuse an output path that cannot be written, before any work is done."""
    if path is None:
        return
    try:
        _check_output(path, option)
    except OSError as exc:  # a name too long for the file system, a loop of links, ...
        raise UsageError(f"{option} {_shown(path)}: {exc.strerror or exc}") from None
    except RuntimeError:  # pathlib's word for a loop of symlinks
        raise UsageError(f"{option} {_shown(path)}: a loop of symbolic links") from None


def _check_output(path: Path, option: str) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"{option} {_shown(path)} is a folder; give a file name")
    if _fifo(path) and not _has_reader(path):
        raise UsageError(f"{option} {_shown(path)} is a FIFO that nobody reads: gradscope "
                         "never waits for a reader; start the reader first, or give a "
                         "regular file")
    if _through(path):
        real = path.resolve()  # a symlink's target (which may not exist yet)
        if real.exists() and not os.access(real, os.W_OK):
            raise UsageError(f"{option} {_shown(path)} is not writable")
        if real.exists() or os.access(real.parent, os.W_OK):
            return
        folder = real.parent
    if not folder.is_dir():
        raise UsageError(f"{option} {_shown(path)}: folder {_shown(folder)} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{option} {_shown(path)}: folder {_shown(folder)} is not writable")


def _shown(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 120 else text[:60] + "…" + text[-40:]


def _through(path: Path) -> bool:
    """An existing path that is not a plain file of its own (a FIFO, a device such as
    /dev/stdout or /dev/null, a symlink): written through, never replaced by a rename."""
    return path.is_symlink() or (path.exists() and not path.is_file())


def _fifo(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


# FIFOs opened for writing when their path was checked, by path: held open until the report
# is written, since a writer that opens and closes one ends its reader's input (EOF)
_FIFOS: dict[str, int] = {}
READER_GRACE = 1.0  # seconds a FIFO's reader is given to come before the FIFO is refused


def _has_reader(path: Path) -> bool:
    """Whether a FIFO has a reader now (opened for writing without blocking: ENXIO where
    none); where it has, the opened end is held for the report."""
    key = os.path.realpath(path)
    if key in _FIFOS:
        return True
    try:
        _FIFOS[key] = _writing_end(path)
    except OSError:
        return False
    return True


def _writing_end(path: Path) -> int:
    """A FIFO opened for writing without blocking, a reader given READER_GRACE seconds to
    come (one starting beside gradscope); OSError (ENXIO) where none came."""
    waited = 0.0
    while True:
        try:
            return os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            if waited >= READER_GRACE:
                raise
            time.sleep(0.05)
            waited += 0.05


def _open_through(path: Path) -> Any:
    """A FIFO, device or symlink opened for writing, never blocking on a FIFO's missing
    reader (an OSError then: ENXIO): the end held since the path was checked, else opened
    now."""
    if not _fifo(path):
        return open(path, "w", encoding="utf-8")
    fd = _FIFOS.pop(os.path.realpath(path), None)
    if fd is None:
        fd = _writing_end(path)
    os.set_blocking(fd, True)  # (a reader is there: the report is written whole)
    return os.fdopen(fd, "w", encoding="utf-8")


def write_atomic(path: Path, text: str | Callable[[TextIO], None]) -> None:
    """Write via a temporary file in the same folder and rename, so readers never see half;
    the file gets the permissions a new file would (the umask's), not mkstemp's 0600. A FIFO,
    device or symlink is opened and written instead: it is never replaced (a FIFO whose
    reader left is an OSError, never a wait)."""
    put = text if callable(text) else (lambda handle: handle.write(text))
    if _through(path):
        with _open_through(path) as handle:
            put(handle)
        return
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            put(handle)
        os.replace(tmp, path)
    except BaseException:  # SIGTERM included (cli.main turns it into SystemExit)
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_file(path: Path, text: str | Callable[[TextIO], None], option: str) -> None:
    """write_atomic, with an OS error as a usage error naming the option — after the report
    was written beside, where the path was a FIFO whose reader left meanwhile (a run never
    loses its report)."""
    try:
        write_atomic(path, text)
    except OSError as exc:
        kept = _beside(path, text) if _fifo(path) else None  # (a writer writes again)
        also = f"; the report was written to {_shown(kept)} instead" if kept else ""
        raise UsageError(f"cannot write {option} {_shown(path)}: "
                         f"{exc.strerror or exc}{also}") from None


def _beside(path: Path, text: str | Callable[[TextIO], None]) -> Path | None:
    """The report in the current folder, named after the FIFO (`NAME.gradscope`), or None
    where that cannot be written either."""
    kept = Path.cwd() / f"{path.name}.gradscope"
    try:
        write_atomic(kept, text)
    except OSError:
        return None
    return kept


def emit(obj: Any, fmt: str, output: Path | None, written: str, to_stderr: bool = False
         ) -> None:
    """Show `obj` on stdout in `fmt`, or write it to `output` and say so (`written`) on
    stdout, or on stderr (`to_stderr`, or where stdout must stay JSON)."""
    from gradscope import render

    if output is not None:
        render.writer(obj, fmt)  # (a format that does not write this kind: refused first)
        write_file(output, lambda handle: render.write(obj, fmt, handle), "--output")
        typer.echo(written, err=to_stderr or fmt == "json")
        return
    with reader_may_leave():
        if render.is_rich(obj, fmt):
            from gradscope.render.console import terminal_console

            console = terminal_console()
            if console.is_terminal:
                render.show(obj, console)
                return
            # a pipe or a log: the same text, without colour codes or padding spaces
            sys.stdout.write(render.text(obj, fmt, console.width))
        else:
            render.write(obj, fmt, sys.stdout)
        sys.stdout.flush()


@contextlib.contextmanager
def reader_may_leave() -> Iterator[None]:
    """Output to a reader that may close the pipe early (`| head`): the exit code still gives
    the verdict (rich and click would turn the broken pipe into exit 1, "check failed")."""
    try:
        yield
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (lives until the process ends)
    except OSError as exc:  # stdout is a full disk (/dev/full), a closed descriptor, ...
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (nothing more can reach it)
        raise UsageError(f"cannot write the report to stdout: {exc.strerror or exc}; write "
                         "it to a file with --output FILE") from None


@contextlib.contextmanager
def target_running(timeout: float | None = None) -> Iterator[None]:
    """Around the part of a command that runs the user's code in this process: it may take
    at most `timeout` seconds (errors.TimedOut); what anything writes to fd 1 behind
    sys.stdout (os.write, C code, a child process) goes to stderr, so that stdout stays the
    report's alone (`--json`); a `chdir` of the target's is undone, so that relative paths
    (`--output`) mean what they meant on the command line."""
    from gradscope.process import deadline

    cwd = _cwd()
    sys.stdout.flush()
    saved = _aside()
    try:
        with deadline(timeout):
            yield
    finally:
        if saved is not None:
            with contextlib.suppress(OSError, ValueError):
                sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        if cwd is not None:
            with contextlib.suppress(OSError):
                os.chdir(cwd)


def _cwd() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the folder was removed under us: nothing to go back to
        return None


def _aside() -> int | None:
    """fd 1 saved and pointed at stderr (or nowhere); None where fd 1 cannot be duplicated."""
    try:
        saved = os.dup(1)
    except OSError:
        return None
    try:
        os.dup2(2, 1)
    except OSError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
    return saved


class Progress:
    """Progress on stderr while work runs (terminals only), transient: it disappears when the
    report is printed. `bars` returns the factory the runner calls for each long pass; `advance`
    counts suite checks."""

    def __init__(self, title: str, total: int | None = None) -> None:
        self.progress: Any = None
        if not sys.stderr.isatty():
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            SpinnerColumn,
            TextColumn,
            TimeElapsedColumn,
        )
        from rich.progress import Progress as Bars

        from gradscope.render.console import SafeConsole

        self.progress = Bars(SpinnerColumn(), TextColumn("{task.description}", markup=False),
                             BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                             console=SafeConsole(stderr=True), transient=True)
        self.main = self.progress.add_task(title, total=total)
        self.progress.start()

    def bars(self) -> Any:
        """start(description, total) → advance(n), or None where no bar is worth showing."""
        if self.progress is None:
            return None

        def start(description: str, total: int) -> Any:
            if total < 2000:
                return None
            task = self.progress.add_task(description, total=total)
            return lambda n: self.progress.advance(task, n)

        return start

    def expect(self, total: int) -> None:
        """The count the main bar runs to, once it is known."""
        if self.progress is not None:
            self.progress.update(self.main, total=total)

    def advance(self, result: Any) -> None:
        if self.progress is not None:
            self.progress.update(self.main, advance=1,
                                 description=f"gradscope run: {result.name}: {result.outcome}")

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
