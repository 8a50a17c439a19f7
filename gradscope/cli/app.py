"""The command line: options → one library call → renderer → exit code. Nothing else.

Imports stay light at module level (typer only) so `gradscope --help` and `--version` never pay
for torch or sympy; each command imports the library when it runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from gradscope._version import __version__

# The expression functions, for help text only (importing the op table would import torch).
# tests/cli/test_help.py keeps this list equal to the op table.
FUNCTION_NAMES = ("abs acos asin atan atan2 ceil clamp cos cosh dot erf exp expm1 floor frac "
                  "log log10 log1p log2 logsumexp max maximum mean min minimum norm pow prod "
                  "relu round sigmoid sign sin sinh softmax softplus sqrt sum tan tanh trunc "
                  "where")

HELP = f"""Inspect PyTorch gradients: autograd, symbolic (sympy) and finite differences side by
side, per element, with every disagreement explained.

TARGET is an expression such as "3*a + 2*b*b + log(c)" (free names are the inputs), or
Python code: my_ops.py:RoundSTE or package.module:NAME naming a torch.autograd.Function, an
nn.Module (class or instance) or a function; its tensor parameters are the inputs.
Operators: + - * / ** @, unary -, comparisons inside where(). Constants: pi, e.
Functions: {FUNCTION_NAMES}.

Exit codes: 0 passed, 1 a check failed (per --fail-on), 2 bad usage or input,
3 the user's own code raised.
"""

app = typer.Typer(help=HELP, add_completion=True, no_args_is_help=True,
                  pretty_exceptions_enable=False, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]})


class Dtype(str, Enum):
    float64 = "float64"
    float32 = "float32"
    float16 = "float16"
    bfloat16 = "bfloat16"


class Format(str, Enum):
    table = "table"
    json = "json"
    markdown = "markdown"


class FailOn(str, Enum):
    mismatch = "mismatch"
    warning = "warning"
    never = "never"


VALUE_HELP = ("1.5, 1,2,3, [[1,2],[3,4]], or randn(2,6), rand(3), uniform(lo,hi,2,3), ones(3), "
              "zeros(3), linspace(lo,hi,n), arange(n)")

TargetArg = Annotated[str, typer.Argument(
    metavar="TARGET",
    help="Expression (\"3*a + 2*b*b + log(c)\") or Python code: path/to/file.py:NAME or "
         "package.module:NAME naming an autograd.Function, an nn.Module or a function.",
    show_default=False)]
AtOpt = Annotated[list[str] | None, typer.Option(
    "--at", metavar="NAME=VALUE", help=f"Value of an input (repeatable). VALUE: {VALUE_HELP}.")]
ShapeOpt = Annotated[list[str] | None, typer.Option(
    "--shape", metavar="[NAME=]2,3",
    help="Shape of a random input (NAME=2,3), or the default for all (2,3).")]
GradOpt = Annotated[str | None, typer.Option(
    "--grad", metavar="VALUE",
    help="Upstream vector v for y.backward(v); must be shaped like the output. Default: ones.")]
ArgOpt = Annotated[list[str] | None, typer.Option(
    "--arg", metavar="NAME=LITERAL",
    help="Non-tensor argument of a Python target (repeatable), e.g. --arg n=4.")]
InitOpt = Annotated[list[str] | None, typer.Option(
    "--init", metavar="NAME=LITERAL",
    help="Constructor argument of an nn.Module class target (repeatable).")]
OrderOpt = Annotated[int, typer.Option(
    "--order", min=1, max=2, help="2: also differentiate the VJP and check double backward "
                                  "(like gradgradcheck).")]
IntermediatesOpt = Annotated[bool, typer.Option(
    "--intermediates", help="Also report the gradient of every intermediate (non-leaf) tensor.")]
RepeatOpt = Annotated[int, typer.Option(
    "--repeat", min=1, help="Call backward N times without zeroing .grad and show that "
                            "gradients accumulate to N × the VJP.")]
DtypeOpt = Annotated[Dtype, typer.Option(
    "--dtype", help="Dtype of the autograd computation; tolerances follow it.")]
EpsOpt = Annotated[float | None, typer.Option(
    "--eps", help="Relative finite-difference step: h = eps*max(1,|x|). [default: 1e-4]",
    show_default=False)]
AtolOpt = Annotated[float | None, typer.Option(
    "--atol", help="Absolute tolerance. [default: float64 1e-9, float32 1e-5, float16 2e-3, "
                   "bfloat16 2e-2]", show_default=False)]
RtolOpt = Annotated[float | None, typer.Option(
    "--rtol", help="Relative tolerance. [default: float64 1e-6, float32 5e-4, float16 2e-2, "
                   "bfloat16 6e-2]", show_default=False)]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of random inputs and upstreams.")]
DeviceOpt = Annotated[str, typer.Option("--device", help="cpu, cuda or cuda:N.")]
FormatOpt = Annotated[Format, typer.Option("--format", "-f", help="Report format.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Same as --format json.")]
OutputOpt = Annotated[Path | None, typer.Option(
    "--output", "-o", help="Write the report to FILE (atomically) instead of stdout.",
    dir_okay=False, show_default=False)]
FailOnOpt = Annotated[FailOn, typer.Option(
    "--fail-on", help="mismatch: exit 1 on a mismatch; warning: also on any diagnostic; "
                      "never: always exit 0.")]
MaxElementsOpt = Annotated[int, typer.Option(
    "--max-elements", help="Tensors larger than this are reported by their worst elements.",
    min=1)]
MaxTotalOpt = Annotated[int, typer.Option(
    "--max-elements-total", min=1,
    help="Refuse inputs holding more elements than this, before allocating them.")]
MaxFdOpt = Annotated[int, typer.Option(
    "--max-fd", min=1, help="A non-elementwise input with more elements than this gets finite "
                            "differences for a seeded sample of --sample elements plus random "
                            "projections over all of them. Raising it is cheap for losses "
                            "like mean((x - y)**2), whose columns are evaluated "
                            "incrementally.")]
SampleOpt = Annotated[int, typer.Option(
    "--sample", min=1, help="How many elements of a sampled input get their own finite "
                            "difference.")]
FullOpt = Annotated[bool, typer.Option("--full", help="Report every element of every tensor.")]
TangentOpt = Annotated[list[str] | None, typer.Option(
    "--tangent", metavar="[NAME=]VALUE",
    help="Forward-mode direction for an input (repeatable; others get zeros). With one input, "
         "VALUE alone is enough. Adds J·t from torch forward AD, sympy and finite differences.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Show the version and exit.")]
          = False) -> None:
    pass


def _fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"gradscope: error: {message}", err=True)
    return typer.Exit(code)


def _assignments(items: list[str] | None, option: str) -> dict[str, str]:
    from gradscope.errors import UsageError
    from gradscope.inputs.text import parse_assignment

    out: dict[str, str] = {}
    for item in items or []:
        name, value = parse_assignment(item, option)
        if name in out:
            raise UsageError(f"{option} gives `{name}` twice")
        out[name] = value
    return out


def _shapes(items: list[str] | None) -> tuple[dict[str, tuple[int, ...]], tuple[int, ...] | None]:
    from gradscope.errors import UsageError
    from gradscope.inputs.text import parse_shape

    named: dict[str, tuple[int, ...]] = {}
    default = None
    for item in items or []:
        if "=" in item:
            name, _, text = item.partition("=")
            name = name.strip()
            if name in named:
                raise UsageError(f"--shape gives `{name}` twice")
            named[name] = parse_shape(text, f"--shape {name}")
        else:
            if default is not None:
                raise UsageError("--shape without a NAME (the default shape) is given twice")
            default = parse_shape(item)
    return named, default


def _tangents(items: list[str] | None) -> dict[str, str] | None:
    if not items:
        return None
    import re

    if len(items) == 1 and not re.match(r"\s*[A-Za-z][A-Za-z0-9_]*\s*=", items[0]):
        return {"*": items[0]}
    return _assignments(items, "--tangent")


def _check_output(path: Path | None) -> None:
    from gradscope.errors import UsageError

    if path is None:
        return
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"--output {path} is a folder; give a file name")
    if not folder.is_dir():
        raise UsageError(f"--output {path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"--output {path}: folder {folder} is not writable")


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file in the same folder and rename, so readers never see half."""
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _progress_factory(command: str, target: str):
    """Progress on stderr while a check runs (terminals only): a spinner for the whole run,
    plus a bar for each long per-element finite-difference pass. Transient: it disappears
    when the report is printed."""
    if not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                        MofNCompleteColumn(), TimeElapsedColumn(),
                        console=Console(stderr=True), transient=True)
    progress.add_task(f"gradscope {command} {target[:60]}", total=None)
    progress.start()

    def start(description: str, total: int):
        if total < 2000:
            return None
        task = progress.add_task(description, total=total)
        return lambda n: progress.advance(task, n)

    start.stop = progress.stop  # type: ignore[attr-defined]
    return start


def _literals(items: list[str] | None, option: str) -> dict[str, Any]:
    from gradscope.targets.python import parse_literal

    return {name: parse_literal(text, f"{option} {name}")
            for name, text in _assignments(items, option).items()}


def _run(command: str, options: dict[str, Any]) -> None:
    """One check/jvp/jacobian run from a command's parameters (its `locals()`); options a
    command does not have (jacobian has no --grad) take their defaults."""
    from gradscope.errors import GradscopeError

    o = {"grad": None, "tangent": None, "repeat": 1, "order": 1, "intermediates": False,
         **options}
    progress = None
    try:
        _check_output(o["output"])
        from gradscope.runner import Request, run

        shapes, default_shape = _shapes(o["shape"])
        progress = _progress_factory(command, o["target"])
        request = Request(
            command=command, target=o["target"], at=_assignments(o["at"], "--at"),
            shapes=shapes, default_shape=default_shape, grad=o["grad"],
            tangent=_tangents(o["tangent"]), dtype=o["dtype"].value, eps=o["eps"],
            atol=o["atol"], rtol=o["rtol"], seed=o["seed"], device=o["device"],
            fail_on=o["fail_on"].value, max_elements=o["max_elements"], full=o["full"],
            progress=progress, args=_literals(o["arg"], "--arg"),
            init=_literals(o["init"], "--init"), repeat=o["repeat"], order=o["order"],
            intermediates=o["intermediates"], max_elements_total=o["max_total"],
            max_fd=o["max_fd"], sample=o["sample"])
        report = run(request)
    except GradscopeError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    finally:
        if progress is not None:
            progress.stop()  # type: ignore[attr-defined]
    with _reader_may_leave():
        _emit(report, Format.json if o["json_flag"] else o["fmt"], o["output"])
    if not report.passed and report.fail_on != "never":
        raise typer.Exit(1)


@contextlib.contextmanager
def _reader_may_leave() -> Iterator[None]:
    """Output to a reader that may close the pipe early (`| head`): the exit code still gives
    the verdict (rich and click would turn the broken pipe into exit 1, "check failed")."""
    try:
        yield
    except BrokenPipeError:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (lives until the process ends)


def _emit(report: Any, fmt: Format, output: Path | None) -> None:
    if fmt is Format.json:
        text = report.to_json() + "\n"
    elif fmt is Format.markdown:
        text = report.to_markdown()
    else:
        text = None
    if output is not None:
        try:
            write_atomic(output, text if text is not None else report.to_text())
        except OSError as exc:
            raise _fail(f"cannot write --output {output}: {exc.strerror or exc}", 2) from None
        verdict = "passed" if report.passed else "FAILED"
        typer.echo(f"gradscope {report.command}: {verdict}; report written to {output}",
                   err=fmt is Format.json)
        return
    if text is not None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from gradscope.render.table import render, terminal_console

    render(report, terminal_console())


@app.command(help="Check gradients per element: autograd vs sympy vs finite differences. "
                  "The verdict also covers seeded random upstream vectors and, when small, the "
                  "full Jacobian. Exit 1 on a real mismatch.")
def check(target: TargetArg, at: AtOpt = None, shape: ShapeOpt = None, grad: GradOpt = None,
          arg: ArgOpt = None, init: InitOpt = None, order: OrderOpt = 1,
          intermediates: IntermediatesOpt = False, dtype: DtypeOpt = Dtype.float64,
          eps: EpsOpt = None, atol: AtolOpt = None, rtol: RtolOpt = None, seed: SeedOpt = 0,
          device: DeviceOpt = "cpu", fmt: FormatOpt = Format.table, json_flag: JsonOpt = False,
          output: OutputOpt = None, fail_on: FailOnOpt = FailOn.mismatch,
          max_elements: MaxElementsOpt = 10_000, full: FullOpt = False,
          max_total: MaxTotalOpt = 20_000_000, max_fd: MaxFdOpt = 20_000,
          sample: SampleOpt = 1_000) -> None:
    _run("check", locals())


def jvp(target: TargetArg, at: AtOpt = None, shape: ShapeOpt = None, grad: GradOpt = None,
        tangent: TangentOpt = None, arg: ArgOpt = None, init: InitOpt = None,
        repeat: RepeatOpt = 1, order: OrderOpt = 1, intermediates: IntermediatesOpt = False,
        dtype: DtypeOpt = Dtype.float64, eps: EpsOpt = None, atol: AtolOpt = None,
        rtol: RtolOpt = None, seed: SeedOpt = 0, device: DeviceOpt = "cpu",
        fmt: FormatOpt = Format.table, json_flag: JsonOpt = False, output: OutputOpt = None,
        fail_on: FailOnOpt = FailOn.mismatch, max_elements: MaxElementsOpt = 10_000,
        full: FullOpt = False, max_total: MaxTotalOpt = 20_000_000, max_fd: MaxFdOpt = 20_000,
        sample: SampleOpt = 1_000) -> None:
    _run("jvp", locals())


JVP_HELP = ("What y.backward(V) computes: the vector-Jacobian product Vᵀ·J for each input, "
            "beside the symbolic formula and finite differences. --tangent adds forward mode "
            "J·T.")
app.command("jvp", help=JVP_HELP)(jvp)
app.command("vjp", help=f"Same as jvp. {JVP_HELP}")(jvp)


@app.command(help="The full Jacobian from each engine (small sizes: at most 250,000 entries).")
def jacobian(target: TargetArg, at: AtOpt = None, shape: ShapeOpt = None, arg: ArgOpt = None,
             init: InitOpt = None, dtype: DtypeOpt = Dtype.float64, eps: EpsOpt = None,
             atol: AtolOpt = None, rtol: RtolOpt = None, seed: SeedOpt = 0,
             device: DeviceOpt = "cpu", fmt: FormatOpt = Format.table,
             json_flag: JsonOpt = False, output: OutputOpt = None,
             fail_on: FailOnOpt = FailOn.mismatch, max_elements: MaxElementsOpt = 10_000,
             full: FullOpt = False, max_total: MaxTotalOpt = 20_000_000,
             max_fd: MaxFdOpt = 20_000, sample: SampleOpt = 1_000) -> None:
    _run("jacobian", locals())


def _simple_request(target: str, at, shape, grad, arg, init, dtype, seed, device):
    from gradscope.inputs.bind import Request

    shapes, default_shape = _shapes(shape)
    return Request(command="check", target=target, at=_assignments(at, "--at"), shapes=shapes,
                   default_shape=default_shape, grad=grad, dtype=dtype.value, seed=seed,
                   device=device, args=_literals(arg, "--arg"), init=_literals(init, "--init"))


GraphFormat = Annotated[Format, typer.Option("--format", "-f",
                                             help="table (a tree), json or markdown.")]


@app.command(help="The backward graph (grad_fn nodes) as a tree, with the gradient flowing "
                  "into and out of every node; nodes that zero gradients (vanishing, saturating) "
                  "or turn them into NaN are marked in words and colour. --dot FILE writes "
                  "Graphviz DOT.")
def graph(target: TargetArg, at: AtOpt = None, shape: ShapeOpt = None, grad: GradOpt = None,
          arg: ArgOpt = None, init: InitOpt = None, dtype: DtypeOpt = Dtype.float64,
          seed: SeedOpt = 0, device: DeviceOpt = "cpu", fmt: GraphFormat = Format.table,
          json_flag: JsonOpt = False, output: OutputOpt = None,
          dot: Annotated[Path | None, typer.Option(
              "--dot", help="Write the graph as Graphviz DOT to FILE.", dir_okay=False,
              show_default=False)] = None) -> None:
    from gradscope.errors import GradscopeError

    try:
        _check_output(output)
        _check_output(dot)
        from gradscope.tools.graph import graph as build_graph

        report = build_graph(_simple_request(target, at, shape, grad, arg, init, dtype, seed,
                                             device))
        if dot is not None:
            write_atomic(dot, report.to_dot())
    except GradscopeError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    except OSError as exc:
        raise _fail(f"cannot write --dot {dot}: {exc.strerror or exc}", 2) from None
    from gradscope.render.graph import tree

    fmt = Format.json if json_flag else fmt
    _emit_other(report, fmt, output, lambda: tree(report))


@app.command(help="Move one input over a range and plot f, the autograd derivative and the "
                  "finite-difference derivative in the terminal; --plot writes PNG or SVG. "
                  "Vanishing gradients and jumps become visible at a glance.")
def sweep(target: TargetArg,
          var: Annotated[str, typer.Option("--var", help="The input to move (a scalar).",
                                           show_default=False)],
          range_: Annotated[str, typer.Option("--range", metavar="LO,HI",
                                              help="The interval, e.g. -2,2.",
                                              show_default=False)],
          points: Annotated[int, typer.Option("--points", min=2, max=5000,
                                              help="Number of points.")] = 200,
          plot: Annotated[Path | None, typer.Option(
              "--plot", help="Also write the plot to FILE.png or FILE.svg (needs matplotlib: "
                             "pip install 'gradscope[plot]').", dir_okay=False,
              show_default=False)] = None,
          at: AtOpt = None, grad: GradOpt = None, arg: ArgOpt = None, init: InitOpt = None,
          dtype: DtypeOpt = Dtype.float64, eps: EpsOpt = None, seed: SeedOpt = 0,
          device: DeviceOpt = "cpu", fmt: GraphFormat = Format.table, json_flag: JsonOpt = False,
          output: OutputOpt = None) -> None:
    from gradscope.errors import GradscopeError, UsageError

    try:
        _check_output(output)
        _check_output(plot)
        lo_hi = [p.strip() for p in range_.split(",")]
        try:
            lo, hi = (float(p) for p in lo_hi)
        except ValueError:
            raise UsageError(f"--range {range_!r}: expected LO,HI such as -2,2") from None
        from gradscope.render.graph import save_plot, sweep_plot
        from gradscope.tools.graph import sweep as run_sweep

        request = _simple_request(target, at, None, grad, arg, init, dtype, seed, device)
        request.eps = eps
        report = run_sweep(request, var, lo, hi, points)
        if plot is not None:
            save_plot(report, plot)
    except GradscopeError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    fmt = Format.json if json_flag else fmt
    _emit_other(report, fmt, output, lambda: sweep_plot(report))


def _emit_other(report: Any, fmt: Format, output: Path | None, renderable) -> None:
    """Output of graph/sweep: a rich renderable, or JSON."""
    if fmt is Format.json:
        text = report.to_json() + "\n"
    else:
        import io

        from rich.console import Console

        from gradscope.render.table import terminal_console

        if output is None:
            terminal_console().print(renderable())
            return
        console = Console(file=io.StringIO(), width=120, color_system=None, record=True)
        console.print(renderable())
        text = console.export_text()
    if output is not None:
        write_atomic(output, text)
        typer.echo(f"report written to {output}", err=True)
    else:
        sys.stdout.write(text)


RUN_HELP = """Run every check declared in [tool.gradscope] of pyproject.toml (or of the TOML file
given): one summary, one exit code (0 all passed, 1 a check failed, 2 bad config or usage,
3 a target's own code raised). Config errors are found before any check runs."""


@app.command("run", help=RUN_HELP)
def run_command(
        config: Annotated[Path | None, typer.Argument(
            metavar="CONFIG", help="TOML file with [tool.gradscope]; default ./pyproject.toml.",
            show_default=False, dir_okay=False)] = None,
        fmt: FormatOpt = Format.table, json_flag: JsonOpt = False,
        output: OutputOpt = None,
        junit_xml: Annotated[Path | None, typer.Option(
            "--junit-xml", help="Also write a JUnit XML report (one testcase per check).",
            dir_okay=False, show_default=False)] = None) -> None:
    from gradscope.errors import GradscopeError

    try:
        _check_output(output)
        _check_output(junit_xml)
        from gradscope.tools.config import load
        from gradscope.tools.suite import run_checks

        specs, where = load(config)
        suite = run_checks(specs, str(where), on_result=_suite_progress(len(specs)))
    except GradscopeError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    finally:
        _suite_progress.stop()  # type: ignore[attr-defined]
    if junit_xml is not None:
        try:
            write_atomic(junit_xml, suite.to_junit_xml())
        except OSError as exc:
            raise _fail(f"cannot write --junit-xml {junit_xml}: {exc.strerror or exc}", 2) \
                from None
    fmt = Format.json if json_flag else fmt
    text = suite.to_json() + "\n" if fmt is Format.json else (
        suite.to_markdown() if fmt is Format.markdown else None)
    if output is not None:
        try:
            write_atomic(output, text if text is not None else _suite_text(suite))
        except OSError as exc:
            raise _fail(f"cannot write --output {output}: {exc.strerror or exc}", 2) from None
        typer.echo(f"gradscope run: {'passed' if suite.passed else 'FAILED'}; report written "
                   f"to {output}", err=fmt is Format.json)
    else:
        with _reader_may_leave():
            if text is not None:
                sys.stdout.write(text)
                sys.stdout.flush()
            else:
                from gradscope.render.table import terminal_console

                _print_suite(suite, terminal_console())
    raise typer.Exit(suite.exit_code)


def _print_suite(suite: Any, console: Any) -> None:
    from gradscope.render.suite import summary_table
    from gradscope.render.table import render

    for result in suite.results:
        if result.outcome == "passed":
            continue
        console.rule(f"{result.name}: {result.outcome}")
        if result.report is not None:
            render(result.report, console)
        elif result.error:
            console.print(result.error, markup=False, highlight=False)
    console.print(summary_table(suite))


def _suite_text(suite: Any) -> str:
    import io

    from rich.console import Console

    console = Console(file=io.StringIO(), width=120, color_system=None, record=True)
    _print_suite(suite, console)
    return console.export_text()


class _SuiteProgress:
    """A progress bar on stderr while checks run (terminals only)."""

    def __init__(self) -> None:
        self.progress: Any = None
        self.task: Any = None

    def __call__(self, total: int):
        if not sys.stderr.isatty():
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

        self.progress = Progress(TextColumn("gradscope run"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.description}"),
                                 console=Console(stderr=True), transient=True)
        self.progress.start()
        self.task = self.progress.add_task("", total=total)

        def advance(result: Any) -> None:
            self.progress.update(self.task, advance=1, description=f"{result.name}: "
                                                                   f"{result.outcome}")
        return advance

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


_suite_progress = _SuiteProgress()


def _click_modules() -> list[Any]:
    """The click exception modules in use: typer >= 0.16 vendors click as typer._click."""
    modules = []
    try:
        from typer._click import exceptions as vendored

        modules.append(vendored)
    except ImportError:
        pass
    try:
        from click import exceptions as upstream

        modules.append(upstream)
    except ImportError:
        pass
    return modules


def entry() -> None:
    """The `gradscope` command: main(), then leave without the interpreter's teardown, which
    with torch and sympy loaded takes about half a second (measured: `check "x**2"` 1.9 s
    with it, 1.4 s without). Everything is written and flushed before."""
    try:
        main()
        code: Any = 0
    except SystemExit as exc:
        code = exc.code
    if code is not None and not isinstance(code, int):  # sys.exit("message")
        print(code, file=sys.stderr)
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe: nothing left to say
            stream.flush()
    os._exit(code or 0)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: one line on stderr for every usage error, never a traceback."""
    mods = _click_modules()

    def kinds(name: str) -> tuple[type, ...]:
        return tuple(getattr(m, name) for m in mods if hasattr(m, name))

    try:
        code = app(args=argv, standalone_mode=False, prog_name="gradscope")
    except kinds("NoArgsIsHelpError") as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx else "")
        code = 0
    except kinds("UsageError") as exc:
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} --help`)" if ctx else ""
        typer.echo(f"gradscope: error: {exc.format_message()}{hint}", err=True)
        code = 2
    except kinds("Exit") as exc:
        code = exc.exit_code
    except kinds("Abort"):
        typer.echo("gradscope: aborted", err=True)
        code = 130
    except Exception as exc:  # a bug of ours: one line, the traceback only on request
        if os.environ.get("GRADSCOPE_DEBUG"):
            raise
        typer.echo(f"gradscope: internal error: {type(exc).__name__}: {exc} "
                   "(set GRADSCOPE_DEBUG=1 for the traceback; please report it)", err=True)
        code = 4
    sys.exit(code if isinstance(code, int) else 0)
