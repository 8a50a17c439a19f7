"""The typer app: every command and its options. The options of a check are generated from
`gradscope.options.SPECS` (flag, type, default, limits, help), so the command line, the Python
API and the run config can never disagree; each command hands its values to `commands.py`."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
import typer.core

from gradscope._version import __version__
from gradscope.cli import commands
from gradscope.options import DEFAULTS, SPECS, Spec
from gradscope.render import FORMATS
from gradscope.suite.config import MAX_MEMORY_MB, MIN_MEMORY_MB

HELP = """Inspect PyTorch gradients: autograd, symbolic (sympy) and finite differences side by
side, per element, with every disagreement explained.

TARGET is an expression such as "3*a + 2*b*b + log(c)" (free names are the inputs), or
Python code: my_ops.py:RoundSTE or package.module:NAME naming a torch.autograd.Function, an
nn.Module (class or instance) or a function; its tensor parameters are the inputs.
Operators: + - * / ** @, unary -, comparisons inside where(). Constants: pi, e.
Functions: `gradscope ops` lists them all.

Exit codes: 0 passed, 1 a check failed (per --fail-on), 2 bad usage or input,
3 the user's own code raised, 4 an internal error of gradscope.
"""

# each option's panel in --help (typer's rich_help_panel), by concern: 45 options in one list
# hid the run modes among the tolerances
TARGET_PANEL, INPUTS, COMPARED, TOLERANCES, MODES, OUTPUTS = (
    "Target: what is called and how", "Inputs", "What is compared",
    "Tolerances and verdict", "Run modes", "Output")
PANELS = {
    TARGET_PANEL: ("arg", "init", "output_index", "output_key", "mode", "imports"),
    INPUTS: ("at", "const", "shape", "grad", "tangent", "dtype", "device", "seed"),
    COMPARED: ("only", "skip", "order", "intermediates", "repeat", "max_fd", "sample",
               "max_elements_total"),
    TOLERANCES: ("eps", "atol", "rtol", "fail_on", "surrogate", "allow_nan"),
    MODES: ("compile", "compile_fallback", "autocast", "plain", "nproc", "sharded",
            "replicated", "context", "after_backward", "partial_grad", "compare_single"),
    OUTPUTS: ("max_elements", "full"),
}
PANEL_OF = {name: panel for panel, names in PANELS.items() for name in names}


class Command(typer.core.TyperCommand):
    """typer's command with a conventional usage line (`TARGET`, not typer's `{TARGET}`) and
    its options in sections by concern (each option's rich_help_panel), in click's plain help
    (gradscope's help text is not rich markup: `[[1,2],[3,4]]` is a value)."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return [piece[1:-1] if piece.startswith("{") and piece.endswith("}") else piece
                for piece in super().collect_usage_pieces(ctx)]

    def format_options(self, ctx: Any, formatter: Any) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            kind = "Arguments" if param.param_type_name == "argument" else \
                getattr(param, "rich_help_panel", None) or "Options"
            sections.setdefault(kind, []).append(record)
        order = ["Arguments", *PANELS, "Options"]
        for name in sorted(sections, key=lambda k: order.index(k) if k in order else len(order)):
            with formatter.section(name):
                formatter.write_dl(sections[name])


app = typer.Typer(help=HELP, add_completion=True, no_args_is_help=True,
                  pretty_exceptions_enable=False, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]})

Format = Enum("Format", {f: f for f in FORMATS}, type=str)  # type: ignore[misc]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gradscope {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", "-V", callback=_version, is_eager=True,
        help="Show the version and exit.")]
          = False) -> None:
    pass


def _param(name: str, annotation: Any, default: Any) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=annotation)


def _spec_param(name: str, spec: Spec, default: Any) -> inspect.Parameter:
    """A typer option from an option's spec; repeatable ones default to None (not given)."""
    default = None if spec.cli is list else default
    if spec.choices:
        kind: Any = Enum(name.title().replace("_", ""), {c: c for c in spec.choices}, type=str)
        if default is None:  # no default: each module's own mode, say
            kind = kind | None
        else:
            default = kind(default)
    elif spec.cli is list:
        kind = list[str] | None
    else:
        kind = spec.cli if default is not None else spec.cli | None
    info = typer.Option(spec.flag, help=spec.help, metavar=spec.metavar, min=spec.minimum,
                        max=spec.maximum, show_default=default is not None and default is not False,
                        rich_help_panel=PANEL_OF.get(name, spec.panel))
    return _param(name, Annotated[kind, info], default)


TARGET = _param("target", Annotated[str, typer.Argument(
    metavar="TARGET", show_default=False,
    help="Expression (\"3*a + 2*b*b + log(c)\") or Python code: path/to/file.py:NAME or "
         "package.module:NAME naming an autograd.Function, an nn.Module or a function.")],
    inspect.Parameter.empty)


def _path(flag: str, help_text: str, short: str | None = None,
          panel: str | None = None) -> Any:
    names = (flag, short) if short else (flag,)
    return Annotated[Path | None, typer.Option(*names, help=help_text, dir_okay=False,
                                               show_default=False, rich_help_panel=panel)]


OUTPUT = [
    _param("fmt", Annotated[Format, typer.Option("--format", "-f", help="Report format.",
                                                 rich_help_panel=OUTPUTS)], Format("table")),
    _param("json_flag", Annotated[bool, typer.Option("--json", help="Same as --format json.",
                                                     rich_help_panel=OUTPUTS)], False),
    _param("output", _path("--output", "Write the report to FILE (atomically) instead of "
                                       "stdout.", "-o", OUTPUTS), None),
]


MAX_TIMEOUT = 7 * 24 * 3600.0  # seconds: a week (a finite number; `inf` is no timeout)


def _timeout(help_text: str, panel: str | None = None) -> inspect.Parameter:
    return _param("timeout", Annotated[float | None, typer.Option(
        "--timeout", metavar="SECONDS", min=0.001, max=MAX_TIMEOUT, help=help_text,
        show_default=False, rich_help_panel=panel)], None)


CHECK_TIMEOUT = _timeout("Stop the check after SECONDS: exit 3 with one line saying so, no "
                         "report written [default: no limit].", TARGET_PANEL)

TARGET_COMMANDS: set[str] = set()  # the commands whose first argument is a TARGET


def _flag(name: str, *spellings: str, help: str) -> inspect.Parameter:
    return _param(name, Annotated[bool, typer.Option(*spellings, help=help)], False)


CHECKING = ("check", "jvp", "jacobian")  # the commands whose options features own too


def declare(name: str, help_text: str, action: Callable[..., None],
            before: list[inspect.Parameter], after: list[inspect.Parameter],
            options_of: str | None = None) -> None:
    """Register command `name`: `before`, the options of `options_of`, `after`; typer reads
    the signature when it builds the command, and `action` gets the values by name."""
    if TARGET in before:
        TARGET_COMMANDS.add(name)
    app.command(name, help=help_text, cls=Command)(_Action(name, action, before, after,
                                                           options_of))


class _Action:
    """A command's callback, whose signature (what typer makes its options of) is made when
    typer asks: the core's options of `options_of` and, for a checking command, those the
    registered features own — where the feature registry is loaded (`cli.main` loads it for a
    checking command; `gradscope --help` never does: torch comes with it)."""

    def __init__(self, name: str, action: Callable[..., None], before: list[inspect.Parameter],
                 after: list[inspect.Parameter], options_of: str | None) -> None:
        self.__name__, self.action, self.options_of = name, action, options_of
        self.before, self.after = before, after

    def _params(self) -> list[inspect.Parameter]:
        specs = [(n, s, getattr(DEFAULTS, n)) for n, s in SPECS.items()]
        features = sys.modules.get("gradscope.features")
        if self.options_of in CHECKING and features is not None:
            specs += [(n, o.spec, o.default) for n, o in features.owned_options().items()]
        spec_params = [_spec_param(n, s, d) for n, s, d in specs
                       if self.options_of is not None and self.options_of in s.commands]
        # typer hands the click context to a parameter annotated typer.Context: `check`
        # reads from it which options the command line gave (the others may come from
        # pyproject.toml)
        context = [_param("ctx", typer.Context, inspect.Parameter.empty)] \
            if self.options_of in CHECKING else []
        return [*context, *self.before, *spec_params, *self.after]

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.Signature(self._params())

    @property
    def __annotations__(self) -> dict[str, Any]:  # type: ignore[override]
        return {p.name: p.annotation for p in self._params()}

    def __call__(self, **values: Any) -> None:
        self.action(**values)


PLOT = _param("plot", Annotated[str | None, typer.Option(
    "--plot", metavar="FILE|-", help="Gradient flow per tensor (mean and max |grad|, forward "
    "order, failing ones marked): FILE.png or FILE.svg (needs matplotlib), or - for a bar chart "
    "in the terminal.", show_default=False, rich_help_panel=OUTPUTS)], None)
JVP_HELP = ("What y.backward(V) computes: the vector-Jacobian product Vᵀ·J for each input "
            "(reverse mode, torch.func.vjp's), beside the symbolic formula and finite "
            "differences. --tangent T adds forward mode J·T (torch.func.jvp's).")
for _name, _command, _help in (
        ("check", "check", "Check gradients per element: autograd vs sympy vs finite "
                           "differences. The verdict also covers seeded random upstream vectors "
                           "and, when small, the full Jacobian. Exit 1 on a real mismatch."),
        ("jvp", "jvp", f"Same as vjp, despite its name: reverse mode unless --tangent. "
                       f"{JVP_HELP}"), ("vjp", "jvp", JVP_HELP),
        ("jacobian", "jacobian", "The full Jacobian from each engine (small sizes: at most "
                                 "250,000 entries).")):
    declare(_name, _help, commands.checker(_command), [TARGET], [*OUTPUT, CHECK_TIMEOUT, PLOT],
            options_of=_command)

declare("graph", "The backward graph (grad_fn nodes) as a tree, with the gradient flowing into "
        "and out of every node; nodes that zero gradients (vanishing, saturating) or turn them "
        "into NaN are marked in words and colour. --svg FILE draws it as a picture (nothing "
        "more to install); --dot FILE writes Graphviz DOT.",
        commands.graph, [TARGET],
        [*OUTPUT, _param("dot", _path("--dot", "Write the graph as Graphviz DOT to FILE."), None),
         _param("svg", _path("--svg", "Draw the graph as an SVG picture in FILE (the output at "
                             "the top, inputs at the bottom, marked nodes in colour)."), None)],
        options_of="graph")

declare("sweep", "Move one input over a range and plot f, the autograd derivative and the "
        "finite-difference derivative in the terminal; --plot writes PNG or SVG. Vanishing "
        "gradients and jumps become visible at a glance.", commands.sweep, [
            TARGET,
            _param("var", Annotated[str, typer.Option(
                "--var", help="The input to move (a scalar).", show_default=False)],
                inspect.Parameter.empty),
            _param("range_", Annotated[str, typer.Option(
                "--range", metavar="LO,HI", help="The interval, e.g. -2,2.",
                show_default=False)], inspect.Parameter.empty),
            _param("points", Annotated[int, typer.Option(
                "--points", min=2, max=5000, help="Number of points.")], 200),
            _param("plot", _path("--plot", "Also write the plot to FILE.png or FILE.svg (needs "
                                           "matplotlib)."), None)],
        OUTPUT, options_of="sweep")

declare("run", """Run every check declared in [tool.gradscope] of pyproject.toml (or of the TOML
file given): one summary, one exit code (0 all passed, 1 a check failed, 2 bad config or usage,
3 a target's own code raised, 5 no check selected). Config errors are found before any check
runs, all at once.""",
        commands.run_config, [_param("config", Annotated[Path | None, typer.Argument(
            metavar="CONFIG", help="TOML file with [tool.gradscope]; default: the nearest "
                                   "pyproject.toml upward that has one.",
            show_default=False, dir_okay=False)], None)],
        [*OUTPUT, _param("junit_xml", _path("--junit-xml", "Also write a JUnit XML report (one "
                                                           "testcase per check)."), None),
         _param("summary", _path("--summary", "Also write the markdown summary to FILE (on "
                                              "GitHub Actions it goes to the step summary "
                                              "too)."), None),
         _param("jobs", Annotated[int | None, typer.Option(
             "--jobs", "-j", min=1, help="Worker processes running checks side by side "
                                         "[default: one per CPU].", show_default=False)], None),
         _param("pattern", Annotated[str | None, typer.Option(
             "-k", metavar="PATTERN", help="Run only the checks whose name matches (a glob such "
                                           "as 'seed-*', or a part of the name).",
             show_default=False)], None),
         _param("shard", Annotated[str | None, typer.Option(
             "--shard", metavar="I/N", help="Run the I-th of N shares of the checks (for a CI "
                                            "matrix of N machines).", show_default=False)],
                None),
         _timeout("Seconds a check may take before it is stopped and fails (`timeout` in the "
                  "config wins) [default: 900]."),
         _param("memory_limit", Annotated[int | None, typer.Option(
             "--memory-limit", metavar="MB", min=MIN_MEMORY_MB, max=MAX_MEMORY_MB,
             help=f"Address-space limit per worker process, in megabytes (at least "
                  f"{MIN_MEMORY_MB}: python and torch need that before any check).",
             show_default=False)], None),
         _flag("exitfirst", "--exitfirst", "-x", help="Stop at the first check (in config "
               "order) that does not pass; the rest are reported as not run."),
         _flag("last_failed", "--last-failed", "--lf", help="Run only the checks that did not "
               "pass last time (recorded in .gradscope_cache/ beside the config); all of them "
               "when none is recorded."),
         _flag("collect_only", "--collect-only", "--co", "--list", help="List the checks that "
               "would run (after -k, --lf, --shard) and exit, running none."),
         _param("quiet", Annotated[int, typer.Option(
             "--quiet", "-q", count=True, help="The summary table only.", show_default=False)], 0),
         _param("verbose", Annotated[int, typer.Option(
             "--verbose", "-v", count=True, help="Every check's report in full, passing ones "
                                                 "too.", show_default=False)], 0),
         _param("fail_on", Annotated[str | None, typer.Option(
             "--fail-on", metavar="mismatch|warning|never", help="What fails, for every check "
             "(over the config's `fail_on`).", show_default=False)], None),
         _flag("show_config", "--show-config", help="Print each selected check as it will "
               "run (its options after the config's defaults) and exit, running none."),
         _flag("config_schema", "--config-schema", help="Print the JSON Schema of "
               "[tool.gradscope] (for editors that check TOML) and exit."),
         _flag("statistics", "--statistics", help="After the summary, count the diagnostics "
               "by kind over all checks."),
         _param("output_format", Annotated[str | None, typer.Option(
             "--output-format", metavar="github", help="github: print GitHub's ::error "
             "annotations on stdout instead of the report (ruff's spelling; on GitHub Actions "
             "they are printed to stderr anyway).", show_default=False)], None)])

declare("ops", "The expression language's op table: every function and operator with its "
        "arity, kinks or jumps, default input domain and what its gradient does.",
        commands.ops, [_param("pattern", Annotated[str | None, typer.Argument(
            metavar="[PATTERN]", help="Only the ops whose name, spelling, family or summary "
            "contains PATTERN (case-insensitive; shell wildcards * ? [] also work).",
            show_default=False)], None)],
        [_param("json_flag", Annotated[bool, typer.Option(
            "--json", help="Print the table as JSON.")], False)])
