"""The fifth attack's surfaces that benchmarks/attack.py did not reach (cases only; attack.py
runs and judges them): custom ops (ops that raise, return aliases, mutate undeclared, odd
schemas, stateful or NaN backwards, aten ops spelled NS::OP, bad --import), --compile (backends
that raise, graph breaks whose reasons carry markup, a target that senses compilation),
--autocast (overflow to inf in float16, dtypes it refuses) and the environment (COLUMNS of
2·10⁹, TERM, TORCH_LOGS, PYTHONWARNINGS=error, ...). Every file is written into the run's
temporary folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"


def _source(name: str) -> str:
    """One of the attack's target files, as the tests keep it (tests/data/NAME), its custom op
    namespace and backend names `attack_t` spelled `attack` as the cases name them."""
    return (DATA / name).read_text(encoding="utf-8").replace("attack_t", "attack")


OPS = _source("attack_ops.py")
COMPILED = _source("attack_compiled.py")
AUTOCAST = _source("attack_autocast.py")


def modern(case: Any, tmp: Path) -> list[Any]:
    """Every case of the surfaces above; `case(surface, args, must_fail=False, env=None)`
    makes one."""
    return [*_ops(case, tmp), *_imports(case, tmp), *_compiled(case, tmp),
            *_autocast(case, tmp), *_environment(case, tmp)]


def _ops(case: Any, tmp: Path) -> list[Any]:
    ops = tmp / "attack_ops.py"
    ops.write_text(OPS)
    wrong = {"uses_nan_backward", "uses_stateful", "uses_raises", "uses_backward_raises",
             "uses_alias", "uses_mutates"}
    names = ["uses_ok", "uses_raises", "uses_backward_raises", "uses_fake_raises",
             "uses_alias", "uses_view", "uses_mutates", "uses_nan_backward", "uses_stateful",
             "uses_pair", "uses_indices", "uses_listed"]
    cases = []
    for name in names:
        for command in ("check", "jvp", "jacobian"):
            cases.append(case("custom ops", [command, f"{ops}:{name}", "--shape", "x=4"],
                              must_fail=name in wrong))
        cases.append(case("custom ops", ["graph", f"{ops}:{name}", "--shape", "x=4"]))
    for op in ("ok", "raises", "backward_raises", "alias", "mutates", "nan_backward",
               "stateful", "pair", "indices", "listed"):
        arg = ["--arg", "k=1"] if op == "pair" else []
        cases.append(case("custom ops", ["check", f"attack::{op}", "--import", str(ops),
                                         "--shape", "x=4", *arg],
                          must_fail=op in {"raises", "backward_raises", "alias", "mutates",
                                           "nan_backward", "stateful"}))
    for spelled in ("aten::sin", "aten::add.Tensor", "aten::nope", "::", "attack::",
                    "aten::_foreach_add.List", "prims::sin", "attack::ok.default"):
        cases.append(case("custom ops", ["check", spelled, "--import", str(ops),
                                         "--shape", "x=4"]))
    return cases


def _imports(case: Any, tmp: Path) -> list[Any]:
    (tmp / "imp_raises.py").write_text("raise RuntimeError('[bold]import refuses[/bold]')\n")
    (tmp / "imp_syntax.py").write_text("def (:\n")
    (tmp / "imp_prints.py").write_text("print('\\x1b[31m<b>noise</b>')\n")
    (tmp / "imp_exits.py").write_text("import sys\nsys.exit(0)\n")
    cases = []
    for imported in ("imp_raises.py", "imp_syntax.py", "imp_prints.py", "imp_exits.py",
                     "missing.py", "no.such.module", "", "../../../etc/passwd"):
        for command in ("check", "graph"):
            cases.append(case("bad --import", [command, "attack::ok", "--import", imported,
                                               "--shape", "x=4"],
                              must_fail=command == "check" and imported != "imp_prints.py"))
    return cases


def _compiled(case: Any, tmp: Path) -> list[Any]:
    target = tmp / "attack_compiled.py"
    target.write_text(COMPILED)
    cases = []
    for name, fails in (("smooth", False), ("breaks", False), ("senses", True),
                        ("dynamic", False), ("refuses", True)):
        for backend in ("eager", "aot_eager", "inductor"):
            cases.append(case("--compile", ["check", f"{target}:{name}", "--shape", "x=4",
                                            "--compile", backend], must_fail=fails))
    for backend in ("attack_failing", "nope", "[red]x[/red]", "", "\x1b[31m", "a" * 5000):
        cases.append(case("--compile", ["check", f"{target}:smooth", "--shape", "x=4",
                                        "--compile", backend], must_fail=True))
    for fmt in ("json", "markdown"):
        cases.append(case("--compile", ["check", f"{target}:breaks", "--shape", "x=4",
                                        "--compile", "eager", "--format", fmt]))
    cases.append(case("--compile", ["check", f"{target}:smooth", "--shape", "x=4",
                                    "--compile", "eager"],
                      must_fail=True, env={"TORCHDYNAMO_DISABLE": "1"}))
    return cases


def _autocast(case: Any, tmp: Path) -> list[Any]:
    target = tmp / "attack_autocast.py"
    target.write_text(AUTOCAST)
    cases = []
    for name in ("overflows", "big", "ints", "mixed", "Linear", "matmul"):
        shape = "x=3,4"
        for dtype in ("float16", "bfloat16"):
            cases.append(case("--autocast", ["check", f"{target}:{name}", "--shape", shape,
                                             "--autocast", dtype],
                              must_fail=name in ("ints",)))
    for bad in (["--autocast", "int8"], ["--autocast", "float16", "--dtype", "float16"],
                ["--autocast", "bfloat16", "--order", "2"],
                ["--autocast", "float16", "--device", "cuda"],
                ["--autocast", "bfloat16", "--compile", "eager"],
                ["--autocast", ""], ["--autocast", "float64"]):
        cases.append(case("--autocast", ["check", f"{target}:matmul", "--shape", "x=3,4",
                                         *bad], must_fail=True))
    cases.append(case("--autocast", ["check", "sin(x @ y)", "--shape", "x=3,4",
                                     "--shape", "y=4,2", "--autocast", "float16"]))
    return cases


ENVIRONMENTS = [
    {"COLUMNS": "2000000000"}, {"COLUMNS": "-5"}, {"COLUMNS": "abc"}, {"COLUMNS": "0"},
    {"LINES": "0"}, {"TERM": "dumb"}, {"TERM": "xterm-256color", "FORCE_COLOR": "1"},
    {"NO_COLOR": "1"}, {"TORCH_LOGS": "+dynamo"}, {"TORCH_LOGS": "nonsense"},
    {"PYTHONWARNINGS": "error"}, {"PYTHONWARNINGS": "error::DeprecationWarning"},
    {"OMP_NUM_THREADS": "0"}, {"PYTHONIOENCODING": "ascii"}, {"LANG": "C", "LC_ALL": "C"},
    {"GRADSCOPE_DEBUG": ""},
]


def _environment(case: Any, tmp: Path) -> list[Any]:
    ops = tmp / "attack_ops.py"  # (written by _ops)
    commands = [
        (["check", "3*a + 2*b*b + log(c)", "--at", "a=1,2,3", "--at", "b=3,4,5", "--at",
          "c=6,7,8"], False),
        (["check", "round(x) * x", "--shape", "x=3"], False),
        (["check", f"{ops}:uses_nan_backward", "--shape", "x=3"], True),
        (["graph", "sin(x) * y", "--shape", "x=3", "--shape", "y=3"], False),
        (["check", "x * 2", "--shape", "x=3", "--format", "markdown"], False),
    ]
    return [case("environment", args, must_fail=fails, env=env)
            for env in ENVIRONMENTS for args, fails in commands]
