"""The process around the CLI: run the typer app, turn every usage error into one line on
stderr and an exit code, and leave quickly."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import warnings
from collections.abc import Mapping
from typing import Any

import typer

from gradscope import process
from gradscope.cli.app import TARGET_COMMANDS, app
from gradscope.errors import Stopped, UsageError
from gradscope.escape import terminal as printable
from gradscope.options import INPUT_NAME, SPECS, Spec

# what --surrogate takes as its value: names, or NAME=EXPRESSION
NAMES = re.compile(rf"{INPUT_NAME}(,{INPUT_NAME})*|{INPUT_NAME}\s*=.+", re.S)


SHORT_OPTIONS = {"-h", "-V", "-f", "-o", "-j", "-k"}


def negative_targets(argv: list[str]) -> list[str]:
    """`gradscope check "-x**2"`: a TARGET that starts with a minus is not an option. A token
    starting with one `-` that is no short option and follows no option (so it is no option's
    value) gets a leading space, which the expression parser ignores and click does not."""
    if not argv or argv[0] not in TARGET_COMMANDS:
        return argv
    out = list(argv)
    for k in range(1, len(out)):
        token, before = out[k], out[k - 1]
        if token == "--":
            break
        if (token.startswith("-") and not token.startswith("--") and len(token) > 1
                and token not in SHORT_OPTIONS and (k == 1 or not before.startswith("-"))):
            out[k] = " " + token
    return out


def with_bare_values(argv: list[str], specs: Mapping[str, Spec] = SPECS) -> list[str]:
    """Gives a flag that may stand alone its bare value when no name follows it (click
    cannot make a repeatable option's value optional): `--surrogate --seed 1` reads as
    `--surrogate=* --seed 1`, `--surrogate x` keeps x; `--eval` reads as `--mode=eval`."""
    # flags that may stand alone (`--surrogate`) → the value they mean then; `--eval` →
    # `--mode=eval`: an option's choices that are flags of their own
    bare = {spec.flag: spec.bare for spec in specs.values() if spec.bare is not None}
    shorthands = {f"--{choice}": f"{spec.flag}={choice}" for spec in specs.values()
                  for choice in spec.shorthands}
    out: list[str] = []
    for k, token in enumerate(argv):
        if (k and argv[k - 1] == "--dtype") or token.startswith("--dtype="):
            token = token.replace("torch.", "", 1)  # `--dtype torch.float32`: torch's spelling
        out.append(shorthands.get(token, token))
        if token == "--":
            return out + argv[k + 1:]
        if token in bare:
            following = argv[k + 1] if k + 1 < len(argv) else None
            if following is None or not NAMES.fullmatch(following):
                out[-1] = f"{token}={bare[token]}"
    return out


def entry() -> None:
    """The `gradscope` command: main(), then leave like any Python program (`sys.exit`), so
    the user's atexit handlers (coverage data of a target's own code, say) still run."""
    for stream in (sys.stdout, sys.stderr):  # an ascii locale, a lone surrogate in a target's
        with contextlib.suppress(AttributeError, ValueError):  # print: escaped, never fatal
            stream.reconfigure(errors="backslashreplace")
    try:
        main()
        code: Any = 0
    except Stopped as exc:  # a signal told gradscope to stop: say so, never blame the target
        sys.stderr.write(f"gradscope: {exc.reason()}\n")
        code = exc.code
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # a real Ctrl-C, wherever it struck
        sys.stderr.write("gradscope: aborted\n")
        code = 130
    if code is not None and not isinstance(code, int):  # sys.exit("message")
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`): nothing left to say, and the
            _silence(stream)  # interpreter's own flush at exit must not complain either
    # The work is done and written: a Ctrl-C while the interpreter tears down (torch and sympy
    # take a while) ends at once with 130, not in a traceback or a death by signal.
    process.handle(signal.SIGINT, lambda signum, frame: process.leave(130))
    if code == 130:  # interrupted mid-import, torch may be half-initialised: a teardown can
        process.leave(130)  # then die by the signal again (measured), so an abort stops here
    _ranks_end(code or 0)
    # _launch's last atexit handler leaves with it, skipping teardown; no atexit handler of
    # the user's code can change it
    process.decide(code or 0)
    # (`raise`, not sys.exit: the target's code may have replaced sys.exit)
    raise SystemExit(code or 0)


def _ranks_end(code: int) -> None:
    """Under torchrun or srun every rank ran this command: they end together, rank 0 (whose
    report is written) first, each with the verdict's code."""
    if "gradscope.targets.distributed.world" not in sys.modules:
        return
    from gradscope.targets.distributed.world import current

    world = current()
    if world is not None:
        world.finish(code)


def _silence(stream: Any) -> None:
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())


# Messages typer's validation writes in its dependencies' words, in ours.
_WORDING = (
    (re.compile(r"Input should be a valid integer, unable to parse string as an integer"),
     "not a whole number"),
    (re.compile(r"Input should be a valid number, unable to parse string as a number"),
     "not a number"),
    (re.compile(r"Input should be greater than or equal to (\S+)"), r"must be at least \1"),
    (re.compile(r"Input should be less than or equal to (\S+)"), r"must be at most \1"),
    (re.compile(r"Value error, (.*?)\.?$"), r"\1"),
)


def own_words(message: str) -> str:
    """A usage error message without pydantic's phrasing."""
    for pattern, words in _WORDING:
        message = pattern.sub(words, message)
    return message


@contextlib.contextmanager
def _torch_warnings() -> Any:
    """Warnings torch raises while gradscope runs an expression's ops (a broadcast target
    size, a deprecated spelling) as one note each on stderr, not as a Python warning pointing
    at gradscope's own source line; the user's own code's warnings are shown as Python shows
    them."""
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    caught: list[Any] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("default")
            # torch's CPU wheel without numpy (a fresh venv: the README's set-up) says so when
            # a module of its own loads late; nothing of gradscope's needs numpy
            warnings.filterwarnings("ignore", message="Failed to initialize NumPy",
                                    category=UserWarning)
            yield
    finally:
        said = set()
        for w in caught:  # (the recorder is gone: showwarning is Python's again)
            text = f"{w.category.__name__}: {(str(w.message).strip().splitlines() or [''])[0]}"
            where = (w.filename, w.lineno) if not w.filename.startswith(ours) else None
            if (text, where) in said:
                continue
            said.add((text, where))
            if where is not None:  # the user's own, once, as Python shows it
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
            else:
                sys.stderr.write(printable(f"gradscope: note: torch warned: {text}") + "\n")


def _asks_json(argv: list[str]) -> bool:
    """Whether the command line asks for JSON (--json, --format json, -f json)."""
    for k, token in enumerate(argv):
        if token == "--":
            return False
        if token in ("--json", "--format=json", "-fjson") or (
                token in ("--format", "-f") and argv[k + 1:k + 2] == ["json"]):
            return True
    return False


def _target_of(argv: list[str]) -> str | None:
    """The command's first positional argument (its TARGET), as far as a line that failed to
    parse tells."""
    return next((t for t in argv[1:] if not t.startswith("-")), None) if argv else None


def _specs(argv: list[str]) -> Mapping[str, Spec]:
    """The options the command line may give: for a checking command also those the
    registered features own (the registry is loaded here, so the command offers them: torch
    comes with it), else the core's (`gradscope --help` stays light)."""
    if not argv or argv[0] not in ("check", "jvp", "vjp", "jacobian"):
        return SPECS
    from gradscope.cli.commands import torch_ready

    try:
        torch_ready()
    except UsageError:  # (torch cannot be imported here: the command says so, exit 2)
        return SPECS
    from gradscope import features

    return features.every_spec()


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one line on stderr for every usage error, never a traceback.
    Errors are caught through typer's public exception classes (its click errors derive from
    `typer.TyperException`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    argv = with_bare_values(negative_targets(argv), _specs(argv))
    try:
        with process.guarded(), _torch_warnings():  # (the console script installed the
            code = app(args=argv, standalone_mode=False, prog_name="gradscope")  # guard)
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:
        typer.echo("gradscope: aborted", err=True)
        code = 130
    except typer.TyperException as exc:
        ctx = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError":  # `gradscope check` alone: its help
            typer.echo(ctx.get_help() if ctx else "")
            code = 0
        else:
            hint = f" (see `{ctx.command_path} --help`)" if ctx else ""
            message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
            typer.echo(printable(f"gradscope: error: {own_words(message)}{hint}"), err=True)
            code = getattr(exc, "exit_code", 2)
            if _asks_json(argv):  # (a program reading JSON gets a document it can parse)
                from gradscope.cli.commands import error_document

                error_document(code, own_words(message), argv[0] if argv else "",
                               _target_of(argv))
    except Exception as exc:  # a bug of ours: one line, the traceback only on request
        if os.environ.get("GRADSCOPE_DEBUG"):
            raise
        typer.echo(printable(f"gradscope: internal error: {type(exc).__name__}: {exc} "
                             "(set GRADSCOPE_DEBUG=1 for the traceback; please report it)"),
                   err=True)
        code = 4
    raise SystemExit(code if isinstance(code, int) else 0)  # (sys.exit may be the target's)
