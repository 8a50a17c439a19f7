"""Time gradscope beside torch.autograd.gradcheck, in one run on one machine, and print ratios.

    python benchmarks/run.py            # all cases (about a minute on 2 cores)
    python benchmarks/run.py --quick    # smaller sizes, for a smoke test

Each case runs in its own subprocess so its peak memory (ru_maxrss) is its own. Times exclude
the Python/torch import; `gradscope` is the library call `gradscope.check(...)`: all three engines,
every element compared, random upstreams included. Both sides are timed warm and at full size,
best of several runs. Three more tables: the symbolic engine alone on a 43-node expression (cold,
first use in a fresh process), the million-element case as a fresh process's first call beside
a plain forward+backward's first call, and start-up of the command line against `import torch,
sympy`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time

FUNCTION = "ScaleBySum (custom Function, y = x·sum(x))"
LOSS = "sum(sin(x)**2) * mean(cos(x))"  # columns evaluated incrementally (one changed element)
CENTRED = "sum((x - mean(x))**2) * mean(cos(x))"  # every element moves: vmap batches, sampling
CASES = {
    # name: (expression, size, run gradcheck slow?, run gradcheck fast?)
    "elementwise-3k": ("3*a + 2*b*b + log(c)", 3000, True, True),
    "elementwise-1M": ("3*a + 2*b*b + log(c)", 1_000_000, False, True),
    "dense-1k": (LOSS, 1000, True, True),
    "dense-10k": (LOSS, 10_000, True, True),
    "dense-1M": (LOSS, 1_000_000, False, True),  # with --max-fd raised: every element
    "dense-vmap-10k": (CENTRED, 10_000, True, True),
    "dense-sampled-50k": (CENTRED, 50_000, False, True),
    # a custom autograd.Function whose Jacobian is full (every output reads every input)
    "function-10k": (FUNCTION, 10_000, True, True),
}
QUICK = {"elementwise-3k": 300, "elementwise-1M": 100_000, "dense-1k": 200, "dense-10k": 1000,
         "dense-1M": 20_000, "dense-vmap-10k": 1000, "dense-sampled-50k": 30_000,
         "function-10k": 500}
# 43 nodes (25 ops) over three inputs, elementwise: the symbolic engine's work at scale.
SYMBOLIC_EXPR = ("sin(a)*exp(-b*b) + log(1 + a*a)*cos(b) - tanh(a*b + c)/(1 + c*c) "
                 "+ sqrt(c*c + 1)*sigmoid(a - b)")


def _scale_by_sum():
    import torch

    class ScaleBySum(torch.autograd.Function):
        """y = x * sum(x): every output depends on every input."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x.sum()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.sum() + (g * x).sum()

    return ScaleBySum


def _torch_fn(expr: str):
    import torch

    if expr == FUNCTION:
        return _scale_by_sum().apply
    if expr.startswith("3*a"):
        return lambda a, b, c: 3 * a + 2 * b * b + torch.log(c)
    if expr == CENTRED:
        return lambda x: ((x - x.mean()) ** 2).sum() * torch.cos(x).mean()
    return lambda x: (torch.sin(x) ** 2).sum() * torch.cos(x).mean()


def _best(fn, repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        tic = time.perf_counter()
        fn()
        times.append(time.perf_counter() - tic)
    return min(times)


def _case(expr: str, size: int):
    """The inputs' names, their seeded values, torch's function and one plain forward+backward
    of it (the anchor every ratio is taken against)."""
    import torch

    fn = _torch_fn(expr)
    names = ["a", "b", "c"] if expr.startswith("3*a") else ["x"]
    gen = torch.Generator().manual_seed(0)
    tensors = [torch.rand(size, generator=gen, dtype=torch.float64) + 0.5 for _ in names]

    def plain():
        leaves = [t.clone().requires_grad_() for t in tensors]
        out = fn(*leaves)
        out.backward(torch.ones_like(out))

    return names, tensors, fn, plain


def run_case(name: str, size: int) -> dict:
    import torch

    import gradscope

    expr, _, slow, fast = CASES[name]
    names, tensors, fn, plain = _case(expr, size)
    options = {"max_fd": size} if name == "dense-1M" else {}

    def ours():
        if expr == FUNCTION:
            report = gradscope.check(_scale_by_sum(), *tensors)
        else:
            report = gradscope.check(expr, **dict(zip(names, tensors, strict=True)), **options)
        assert report.passed

    # Both sides are timed warm, at full size (the allocator has grown its heap, the first
    # call's one-off costs are paid), best of several runs: steady state against steady state.
    plain()
    ours()
    result = {"case": name, "expression": expr, "size": size, "inputs": len(names),
              "plain_fwd_bwd_s": _best(plain, 7), "gradscope_s": _best(ours, 5)}
    # gradscope's own peak, before gradcheck (whose slow mode holds a dense Jacobian) runs
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    leaves = tuple(t.clone().requires_grad_() for t in tensors)
    if slow:
        tic = time.perf_counter()
        ok = torch.autograd.gradcheck(fn, leaves, fast_mode=False)
        result["gradcheck_slow_s"] = time.perf_counter() - tic
        assert ok
    if fast:
        result["gradcheck_fast_s"] = _best(
            lambda: torch.autograd.gradcheck(fn, leaves, fast_mode=True), 2)
    return result


def run_symbolic(size: int) -> dict:
    """Build the symbolic engine (sympy derivatives, cse, torch evaluation) and take one VJP,
    cold: the first use in this process."""
    import torch

    from gradscope.engines.symbolic import SymbolicEngine
    from gradscope.expr.parse import parse

    gen = torch.Generator().manual_seed(0)
    values = {n: torch.rand(size, generator=gen, dtype=torch.float64) + 0.5 for n in "abc"}
    expr = parse(SYMBOLIC_EXPR)
    tic = time.perf_counter()
    engine = SymbolicEngine(expr, values)
    engine.vjp(torch.ones(size, dtype=torch.float64))
    cold = time.perf_counter() - tic
    tic = time.perf_counter()
    engine.vjp(torch.ones(size, dtype=torch.float64))
    return {"case": "symbolic", "expression": SYMBOLIC_EXPR, "nodes": len(list(expr.walk())),
            "size": size, "cold_s": cold, "vjp_s": time.perf_counter() - tic}


def run_first(size: int) -> dict:
    """The million-element case as the first call of a fresh process: one plain
    forward+backward first (its own first call: torch's one-off costs), then
    `gradscope.check` (importing what it uses included), then the plain call warm."""
    import torch

    torch.set_num_threads(2)
    expr = CASES["elementwise-1M"][0]
    names, tensors, _, plain = _case(expr, size)
    tic = time.perf_counter()
    plain()
    cold_plain = time.perf_counter() - tic
    tic = time.perf_counter()
    import gradscope

    assert gradscope.check(expr, **dict(zip(names, tensors, strict=True))).passed
    first = time.perf_counter() - tic
    return {"case": "first", "size": size, "plain_first_s": cold_plain,
            "plain_warm_s": _best(plain, 7), "gradscope_first_s": first}


def _wall(argv: list[str], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        tic = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=True)
        times.append(time.perf_counter() - tic)
    return min(times)


def run_startup() -> list[dict]:
    """Wall time of the command line (best of three fresh processes each)."""
    cli = shutil.which("gradscope")
    base = [cli] if cli else [sys.executable, "-m", "gradscope"]
    imports = _wall([sys.executable, "-c", "import torch, sympy"])
    rows = [{"command": "python -c 'import torch, sympy'", "wall_s": imports}]
    for args in (["--help"], ["--version"], ["check", "x**2"]):
        rows.append({"command": "gradscope " + " ".join(args), "wall_s": _wall(base + args),
                     "vs_import": None})
        rows[-1]["vs_import"] = rows[-1]["wall_s"] / imports
    return rows


def _subprocess(args: list[str]) -> str:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=True, env=dict(os.environ, PYTHONPATH=os.getcwd()))
    return out.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print JSON rows instead")
    args = parser.parse_args()
    if args.case == "symbolic":
        print(json.dumps(run_symbolic(args.size)))
        return
    if args.case == "first":
        print(json.dumps(run_first(args.size)))
        return
    if args.case:
        print(json.dumps(run_case(args.case, args.size)))
        return
    rows = []
    for name, (_, size, _, _) in CASES.items():
        size = QUICK[name] if args.quick else size
        rows.append(json.loads(_subprocess(["--case", name, "--size", str(size)])))
    symbolic = json.loads(_subprocess(["--case", "symbolic",
                                       "--size", str(100_000 if args.quick else 1_000_000)]))
    first = min((json.loads(_subprocess(["--case", "first", "--size",
                                         str(QUICK["elementwise-1M"] if args.quick
                                             else CASES["elementwise-1M"][1])]))
                 for _ in range(3)), key=lambda r: r["gradscope_first_s"])
    startup = run_startup()
    if args.json:
        print(json.dumps({"checks": rows, "symbolic": symbolic, "first": first,
                          "startup": startup}, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    machine = (f"{platform.machine()}, {os.cpu_count()} cores, Python "
               f"{platform.python_version()}")
    table = Table(title=f"gradscope vs torch.autograd.gradcheck — {machine}")
    for col in ("case", "size", "plain f+b", "gradscope", "× plain", "gradcheck slow",
                "slow / gradscope", "gradcheck fast", "gradscope / fast", "gradscope peak RSS"):
        table.add_column(col, justify="right" if col != "case" else "left")
    for r in rows:
        g = r["gradscope_s"]
        slow, fast = r.get("gradcheck_slow_s"), r.get("gradcheck_fast_s")
        table.add_row(
            r["case"], f"{r['inputs']}×{r['size']:,}", f"{r['plain_fwd_bwd_s'] * 1e3:.1f} ms",
            f"{g * 1e3:.1f} ms", f"{g / r['plain_fwd_bwd_s']:.1f}×",
            f"{slow:.2f} s" if slow else "not run", f"{slow / g:.0f}×" if slow else "—",
            f"{fast * 1e3:.1f} ms" if fast else "not run", f"{g / fast:.1f}×" if fast else "—",
            f"{r['peak_rss_mb']:.0f} MB")
    console = Console()
    if not console.is_terminal:
        console.width = 160
    console.print(table)
    sym = Table(title="symbolic engine alone (cold: sympy derivatives, cse, torch evaluation)")
    for col in ("expression", "nodes", "size", "build + first VJP", "next VJP"):
        sym.add_column(col, justify="left" if col == "expression" else "right")
    sym.add_row(symbolic["expression"], str(symbolic["nodes"]), f"3×{symbolic['size']:,}",
                f"{symbolic['cold_s'] * 1e3:.0f} ms", f"{symbolic['vjp_s'] * 1e3:.1f} ms")
    console.print(sym)
    once = Table(title="the first call of a process (best of 3 processes)")
    for col in ("case", "size", "plain f+b first", "plain f+b warm", "gradscope first",
                "× plain first", "× plain warm"):
        once.add_column(col, justify="left" if col == "case" else "right")
    g = first["gradscope_first_s"]
    once.add_row(CASES["elementwise-1M"][0], f"3×{first['size']:,}",
                 f"{first['plain_first_s'] * 1e3:.0f} ms", f"{first['plain_warm_s'] * 1e3:.1f} ms",
                 f"{g * 1e3:.0f} ms", f"{g / first['plain_first_s']:.1f}×",
                 f"{g / first['plain_warm_s']:.0f}×")
    console.print(once)
    start = Table(title="start-up (wall time of a fresh process, best of 3)")
    for col in ("command", "wall", "× import torch, sympy"):
        start.add_column(col, justify="left" if col == "command" else "right")
    for r in startup:
        ratio = r.get("vs_import")
        start.add_row(r["command"], f"{r['wall_s']:.2f} s", f"{ratio:.2f}×" if ratio else "—")
    console.print(start)


if __name__ == "__main__":
    main()
