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

OPS = '''
import torch

@torch.library.custom_op("attack::ok", mutates_args=())
def ok(x: torch.Tensor) -> torch.Tensor:
    return x.sin()

@ok.register_fake
def _(x):
    return torch.empty_like(x)

def _keep(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])

ok.register_autograd(lambda ctx, g: g * ctx.saved_tensors[0].cos(), setup_context=_keep)

@torch.library.custom_op("attack::raises", mutates_args=())
def raises(x: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("[bold red]the op refuses[/] \\x1b[31m")

@raises.register_fake
def _(x):
    return torch.empty_like(x)

@torch.library.custom_op("attack::backward_raises", mutates_args=())
def backward_raises(x: torch.Tensor) -> torch.Tensor:
    return x * 2

@backward_raises.register_fake
def _(x):
    return torch.empty_like(x)

def _raise(ctx, g):
    raise ValueError("<script>backward refuses</script>")

backward_raises.register_autograd(_raise, setup_context=_keep)

@torch.library.custom_op("attack::fake_raises", mutates_args=())
def fake_raises(x: torch.Tensor) -> torch.Tensor:
    return x * 3

@fake_raises.register_fake
def _(x):
    raise RuntimeError("the fake kernel refuses")

fake_raises.register_autograd(lambda ctx, g: g * 3, setup_context=_keep)

@torch.library.custom_op("attack::alias", mutates_args=())
def alias(x: torch.Tensor) -> torch.Tensor:
    return x  # an alias of its input: torch forbids it

@alias.register_fake
def _(x):
    return torch.empty_like(x)

@torch.library.custom_op("attack::view", mutates_args=())
def view(x: torch.Tensor) -> torch.Tensor:
    return x.view(-1)

@view.register_fake
def _(x):
    return torch.empty_like(x).view(-1)

@torch.library.custom_op("attack::mutates", mutates_args=())
def mutates(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)  # writes into its input, declaring none
    return x.sin()

@mutates.register_fake
def _(x):
    return torch.empty_like(x)

mutates.register_autograd(lambda ctx, g: g * ctx.saved_tensors[0].cos(), setup_context=_keep)

@torch.library.custom_op("attack::nan_backward", mutates_args=())
def nan_backward(x: torch.Tensor) -> torch.Tensor:
    return x * x

@nan_backward.register_fake
def _(x):
    return torch.empty_like(x)

nan_backward.register_autograd(lambda ctx, g: g * float("nan"), setup_context=_keep)

CALLS = [0]

@torch.library.custom_op("attack::stateful", mutates_args=())
def stateful(x: torch.Tensor) -> torch.Tensor:
    return x * x

@stateful.register_fake
def _(x):
    return torch.empty_like(x)

def _stateful(ctx, g):
    CALLS[0] += 1
    return g * 2 * ctx.saved_tensors[0] * (1.5 if CALLS[0] % 2 == 0 else 1.0)

stateful.register_autograd(_stateful, setup_context=_keep)

@torch.library.custom_op("attack::pair", mutates_args=())
def pair(x: torch.Tensor, k: int, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    return x * scale, x.roll(k)

@pair.register_fake
def _(x, k, scale=1.0):
    return torch.empty_like(x), torch.empty_like(x)

@torch.library.custom_op("attack::indices", mutates_args=())
def indices(x: torch.Tensor) -> torch.Tensor:
    return x.argsort()

@indices.register_fake
def _(x):
    return torch.empty_like(x, dtype=torch.long)

@torch.library.custom_op("attack::listed", mutates_args=())
def listed(xs: list[torch.Tensor]) -> torch.Tensor:
    return sum(x.sin() for x in xs)

@listed.register_fake
def _(xs):
    return torch.empty_like(xs[0])

def uses_ok(x):
    return ok(x).sum(-1)

def uses_raises(x):
    return raises(x)

def uses_backward_raises(x):
    return backward_raises(x).sum()

def uses_fake_raises(x):
    return fake_raises(x)

def uses_alias(x):
    return alias(x) * 2

def uses_view(x):
    return view(x) * 2

def uses_mutates(x):
    return mutates(x.clone())

def uses_nan_backward(x):
    return nan_backward(x)

def uses_stateful(x):
    return stateful(x)

def uses_pair(x):
    a, b = pair(x, 1, 2.0)
    return a + b

def uses_indices(x):
    return x[indices(x)]

def uses_listed(x):
    return listed([x, x * 2])
'''

COMPILED = '''
import torch

def smooth(x):
    return torch.tanh(x) * x.sin()

def breaks(x):
    y = x.sin()
    print("[bold red]a graph break[/] <b>x</b> \\x1b[31m")
    return y * x

def senses(x):
    if torch.compiler.is_compiling():
        return x * 3  # another function when compiled
    return x * 2

def dynamic(x):
    if float(x.sum()) > 0:  # a data-dependent branch: a graph break
        return x.exp()
    return x.cos()

def refuses(x):
    if torch.compiler.is_compiling():
        raise RuntimeError("[link=http://x]refuses compilation[/link]")
    return x * 2

def failing_backend(gm, example_inputs):
    raise RuntimeError("[red]this backend fails[/red] \\x1b[2J")

def markup_backend(gm, example_inputs):
    return gm.forward

torch._dynamo.register_backend(failing_backend, name="attack_failing")
'''

AUTOCAST = '''
import torch

def overflows(x):
    return (x @ x.T * 1e5).sum(-1)  # past float16's range under autocast

def big(x):
    return torch.exp(x * 20) @ torch.ones(x.shape[-1], 2)

def ints(x):
    return (x @ x.T).long()

def mixed(x):
    return (x.half() @ x.T.half()).float().sum(-1)

class Linear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.lin(x).tanh()

def matmul(x):
    return (x @ x.T).tanh()
'''


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
