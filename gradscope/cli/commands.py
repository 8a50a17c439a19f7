"""What each command does with its values: options → one library call → output → exit code.
The library is imported inside each command, so `--help` never pays for torch."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Any

import typer

from gradscope.cli.output import (
    Progress,
    check_output,
    emit,
    reader_may_leave,
    target_running,
    write_file,
)
from gradscope.errors import GradscopeError, UsageError
from gradscope.escape import terminal as printable
from gradscope.options import Options, Request, from_values


def fail(message: str, code: int) -> typer.Exit:
    typer.echo(f"gradscope: error: {printable(message)}", err=True)
    return typer.Exit(code)


@contextmanager
def reported(values: dict[str, Any] | None = None, command: str = "") -> Iterator[None]:
    """Errors of gradscope (bad input: 2, the user's code: 3) as one line and an exit code;
    where the command's `values` ask for JSON, also one JSON document saying so (on stdout,
    or in --output where it names a file): a program reading the JSON always gets one."""
    try:
        yield
    except GradscopeError as exc:
        if _other_rank():  # (rank 0 says it; every rank exits with its code)
            raise typer.Exit(exc.exit_code) from None
        if values is not None and _format(values) == "json":
            _error_document(exc, values, command)
        raise fail(str(exc), exc.exit_code) from None


def _other_rank() -> bool:
    """Whether this process is a rank other than 0 of a distributed check (under torchrun or
    srun every rank runs the command, and rank 0 alone writes the report)."""
    if "gradscope.targets.distributed.world" not in sys.modules:
        return False
    from gradscope.targets.distributed.world import quiet

    return quiet()


def _error_document(exc: GradscopeError, values: dict[str, Any], command: str) -> None:
    """The JSON document of a command that ended with an error instead of a report."""
    extra: dict[str, Any] = {}
    for field in ("during", "error", "detail", "frames"):  # the user's code's (exit 3)
        if hasattr(exc, field):
            extra["exception" if field == "error" else field] = (
                list(getattr(exc, field)) if field == "frames" else getattr(exc, field))
    error_document(exc.exit_code, str(exc), command, values.get("target"),
                   values.get("output"), extra)


def error_document(code: int, message: str, command: str, target: Any = None,
                   output: Any = None, extra: dict[str, Any] | None = None) -> None:
    """One JSON document (schema gradscope.error/1) saying a command ended with `code`: on
    stdout, or in `output` where that names a file that can be written."""
    import json

    from gradscope._version import __version__
    from gradscope.report.kinds import ERROR

    document = {"schema": ERROR, "version": __version__, "command": command,
                "target": target, "exit_code": code, "error": message, **(extra or {})}
    text = json.dumps(document, indent=2) + "\n"
    if output is not None:
        with contextlib.suppress(GradscopeError):
            write_file(Path(output), text, "--output")
            return
    with reader_may_leave():
        sys.stdout.write(text)
        sys.stdout.flush()


def torch_ready() -> None:
    """torch, imported before a command's work: an environment that makes importing it fail
    (TORCH_LOGS naming no log torch knows) is a usage error naming it, exit 2 — never
    gradscope's own (exit 4)."""
    if not _REFUSED and "torch" not in sys.modules:
        try:
            import torch  # noqa: F401
        except Exception as exc:  # (kept: a second import fails saying something else)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            _REFUSED.append(f"torch cannot be imported in this environment: {first}")
    if _REFUSED:
        raise UsageError(_REFUSED[0]) from None


_REFUSED: list[str] = []


@contextmanager
def prints_kept() -> Iterator[None]:
    """What the target's code prints while a graph or sweep is made (at import, in forward)
    kept off stdout (which may be a JSON document) and shown after on stderr, escaped: user
    text is data, never a terminal's control sequence."""
    import io
    from contextlib import redirect_stdout

    printed = io.StringIO()
    try:
        with redirect_stdout(printed):
            yield
    finally:
        lines = printed.getvalue().splitlines()
        if lines:
            shown = " | ".join(lines[:3])[:300]
            typer.echo(printable(f"gradscope: note: the target printed {len(lines)} "
                                 f"line(s): {shown}"), err=True)


def options_from(values: dict[str, Any], configured: dict[str, Any] | None = None) -> Options:
    """The command's option values (the core's options and the features' own; not given:
    `configured`, else the default)."""
    from gradscope import features
    specs = features.every_spec()
    given = {k: v.value if isinstance(v, Enum) else v for k, v in values.items()
             if k in specs and v is not None}
    return from_values({**given, **(configured or {})}, owned=features.owned_options())


def configured(values: dict[str, Any], command: str) -> tuple[dict[str, Any], str]:
    """For `check`, `jvp` and `jacobian`: the top-level [tool.gradscope] defaults of the
    nearest pyproject.toml for the options the command line did not give (as `gradscope run`
    takes them), and a note naming them."""
    from gradscope.suite.config import defaults_near

    ctx = values.get("ctx")
    if ctx is None:
        return {}, ""
    from gradscope import features

    taken, specs = {}, features.every_spec()
    defaults, path = defaults_near()
    for key, value in defaults.items():
        source = ctx.get_parameter_source(key)
        if key in specs and command in specs[key].commands and (
                source is None or source.name == "DEFAULT"):
            taken[key] = value
    note = (f"defaults from [tool.gradscope] in {path}: {', '.join(sorted(taken))}"
            if taken else "")
    return taken, note


def _format(values: dict[str, Any]) -> str:
    return "json" if values.get("json_flag") else values["fmt"].value


def checker(command: str) -> Callable[..., None]:
    """check / jvp / jacobian: the runner, then the report, then exit 1 if it failed."""

    def action(**values: Any) -> None:
        from gradscope.compare import outcome

        output: Path | None = values["output"]
        progress = None
        with reported(values, command):
            torch_ready()
            check_output(output)
            plot = values.get("plot")
            if plot not in (None, "-"):
                from gradscope.render.flow import plotter

                check_output(Path(plot), "--plot")
                if Path(plot).suffix.lower() != ".svg":  # (SVG is drawn without matplotlib)
                    plotter(Path(plot))  # before the check: a missing extra costs nothing
            taken, note = configured(values, command)
            options = _ranked(options_from(values, taken), values["target"])
            from gradscope import api

            progress = Progress(f"gradscope {command} {values['target'][:60]}")
            try:
                with target_running(values.get("timeout")):
                    report = api.run(Request(command, values["target"], options,
                                             progress=progress.bars(),
                                             notes=(note,) if note else ()))
            finally:
                progress.stop()
            if _other_rank():
                raise typer.Exit(1 if outcome.fails(report) else 0)
            verdict = "passed" if report.passed else "FAILED"
            emit(report, _format(values), output,
                 f"gradscope {report.command}: {verdict}; report written to {output}")
            if plot is not None:
                _flow_plot(report, plot, _format(values) == "json" and output is None)
        if outcome.fails(report):
            raise typer.Exit(1)

    return action


def _ranked(options: Options, target: str) -> Options:
    """Under torchrun or srun (this process one of the ranks it started), a FILE.py:NAME
    target is checked across them: --nproc is the world's size."""
    from gradscope.targets.loading import is_python_target

    if options.nproc or not is_python_target(target):
        return options
    from gradscope.targets.distributed import launched_world

    size = launched_world()
    return options if size is None else options.updated(nproc=size)


def _flow_plot(report: Any, plot: str, stdout_is_json: bool) -> None:
    """--plot FILE: the gradient-flow picture written; --plot -: the bar chart (on stderr
    where stdout carries JSON)."""
    from gradscope.render import flow

    if plot != "-":
        report.plot().save(Path(plot))  # SVG drawn by gradscope, PNG through matplotlib
        typer.echo(f"gradient flow plot written to {plot}", err=True)
        return
    from gradscope.render.console import SafeConsole, terminal_console

    console = SafeConsole(stderr=True, highlight=False) if stdout_is_json else \
        terminal_console()
    with reader_may_leave():
        console.print(flow.flow_chart(report))


def graph(**values: Any) -> None:
    with reported(values, "graph"):
        torch_ready()
        check_output(values["output"])
        check_output(values["dot"], "--dot")
        check_output(values["svg"], "--svg")
        if values["svg"] is not None and values["svg"].suffix.lower() != ".svg":
            raise UsageError(f"--svg {values['svg']}: the file must end in .svg (the picture "
                             "is SVG text; --dot FILE writes Graphviz DOT)")
        from gradscope import api
        from gradscope.render.graph import dot
        from gradscope.render.graph_svg import svg

        with target_running(), prints_kept():
            report = api.graph(Request("check", values["target"], options_from(values)))
        if values["dot"] is not None:
            write_file(values["dot"], dot(report), "--dot")
        if values["svg"] is not None:
            write_file(values["svg"], svg(report), "--svg")
        emit(report, _format(values), values["output"], f"report written to {values['output']}",
             to_stderr=True)


def sweep(**values: Any) -> None:
    with reported(values, "sweep"):
        torch_ready()
        check_output(values["output"])
        check_output(values["plot"], "--plot")
        from gradscope import api

        try:
            lo, hi = api.read_range(values["range_"])
        except UsageError:
            raise UsageError(f"--range {values['range_']!r}: expected LO,HI such as -2,2") \
                from None
        from gradscope.render.graph import save_plot

        request = Request("check", values["target"], options_from(values))
        with target_running(), prints_kept():
            report = api.sweep(request, values["var"], lo, hi, values["points"])
        if values["plot"] is not None:
            if values["plot"].suffix.lower() == ".svg":
                report.save(values["plot"])  # drawn by gradscope: nothing to install
            else:
                save_plot(report, values["plot"])  # PNG through matplotlib (or why not)
        emit(report, _format(values), values["output"], f"report written to {values['output']}",
             to_stderr=True)


def run_config(**values: Any) -> None:
    output, junit, summary = values["output"], values["junit_xml"], values["summary"]
    with reported(values, "run"):
        check_output(output)
        check_output(junit, "--junit-xml")
        check_output(summary, "--summary")
        from gradscope.suite.run import run_config as run

        chosen = {"pattern": values["pattern"], "shard_of": values["shard"],
                  "last_failed": values["last_failed"]}
        if values["config_schema"]:
            import json

            from gradscope.suite.schema import schema

            text = json.dumps(schema(), indent=2)
            if output is not None:
                write_file(output, text + "\n", "--output")
            else:
                typer.echo(text)
            raise typer.Exit(0)
        if values["output_format"] not in (None, "github"):
            raise UsageError(f"--output-format {values['output_format']!r}: the one format "
                             "it names is github (--format chooses table, json or markdown)")
        if values["collect_only"] or values["show_config"]:
            _listed(values["config"], chosen, _format(values), values["show_config"])
        progress = Progress("gradscope run")
        try:
            suite = run(values["config"], progress.advance, jobs=values["jobs"],
                        timeout=values["timeout"], memory_mb=values["memory_limit"],
                        on_count=progress.expect, exitfirst=values["exitfirst"],
                        fail_on=values["fail_on"], **chosen)
        finally:
            progress.stop()
        suite.verbosity = values["verbose"] - values["quiet"]
        annotated = values["output_format"] == "github"
        if annotated:  # the annotations instead of the report on stdout; files as asked
            from gradscope.suite import github

            for line in github.annotations(suite, Path(suite.config)):
                typer.echo(line)
        if output is not None or not annotated:
            # the report first: a file for CI that cannot be written (exit 2) loses nothing
            emit(suite, _format(values), output, f"gradscope run: "
                 f"{'passed' if suite.passed else 'FAILED'}; report written to {output}",
                 to_stderr=annotated)
        if values["statistics"] and not annotated:
            from gradscope.render.suite import statistics

            typer.echo(statistics(suite))
        if junit is not None:
            from gradscope.render.suite import junit_xml

            write_file(junit, junit_xml(suite), "--junit-xml")
        _ci_outputs(suite, summary, annotated)
    raise typer.Exit(suite.exit_code)


def _listed(config: Path | None, chosen: dict[str, Any], fmt: str, options: bool) -> None:
    """--collect-only: the checks that would run, one a line (JSON: a list); --show-config:
    each with the options it runs with (those not at their defaults). Then exit 0."""
    import json

    from gradscope.suite.run import collect, settings

    specs, where, note = collect(config, **chosen)
    rows = [{"name": s.name, "target": str(s.request.target), "command": s.request.command,
             **({"options": settings(s)} if options else {})} for s in specs]
    if fmt == "json" or options:
        typer.echo(json.dumps({"config": str(where), "notes": [note] if note else [],
                               "checks": rows}, indent=2, default=str))
    else:
        for spec in specs:
            typer.echo(printable(f"{spec.name}  ({spec.request.command} "
                                 f"{spec.request.target})"))
        typer.echo(printable(f"{len(specs)} check(s) in {where}" +
                             (f" · {note}" if note else "")))
    raise typer.Exit(0)


def _ci_outputs(suite: Any, summary: Path | None, annotated: bool) -> None:
    """The markdown summary (--summary FILE), and on GitHub Actions the annotations (stderr,
    so that stdout stays the report; none where --output-format github printed them: GitHub
    reads both streams, and one failure is one annotation) and the step summary."""
    from gradscope import render
    from gradscope.suite import github

    markdown = render.text(suite, "markdown") if summary is not None or github.active() else ""
    if summary is not None:
        write_file(summary, markdown, "--summary")
    if github.active():
        for line in [] if annotated else github.annotations(suite, Path(suite.config)):
            typer.echo(line, err=True)
        unwritten = github.append_summary(markdown)
        if unwritten:
            typer.echo(printable(unwritten), err=True)


def ops(**values: Any) -> None:
    from gradscope.render.ops import show, to_json
    from gradscope.tools.ops import table

    with reported():
        torch_ready()
        rows = table(values["pattern"])
        if not rows:
            raise UsageError(f"no op matches {values['pattern']!r}; `gradscope ops` lists "
                             "them all")
    if values["json_flag"]:
        typer.echo(to_json(rows))
    else:
        from gradscope.render.console import terminal_console

        show(rows, terminal_console())
