"""A hostile-input run of the command line (the fourth attack's surfaces): every case is run
as a user would, in a subprocess with a time limit, and judged by the promises alone —

* never exit 4 (gradscope's own error) and never killed by a signal;
* never PASS (exit 0) where the case says nothing can be compared or the code is wrong;
* no raw ESC in anything printed; no `<a `/`<svg` tag from user text in HTML;
* done within the limit (bounded work).

    python benchmarks/attack.py [--limit SECONDS] [--only PREFIX]

Prints one line per broken promise and the counts per surface. Cases are generated here
(no network, no files outside a temporary folder)."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from attack_modern import modern  # noqa: E402 (beside this file)


@dataclass
class Case:
    surface: str
    args: list[str]
    must_fail: bool = False  # exit 0 would be a false pass
    env: dict[str, str] = field(default_factory=dict)


def _nothing_compared() -> list[Case]:
    exprs = ["x * inf", "x * 1e308 * 1e308", "ldexp(x, 100000)", "ldexp(x, 5000)",
             "x * -inf", "exp(x) * inf", "x / (x * 0)", "where(x > 100, x, x * inf)",
             "exp(x * 1000) * 0 + inf", "F.pad(x, (1, 1), value=inf) * inf",
             "torch.masked.mean(x, mask=m)", "x / 0 * 0", "log(x * 0) * x",
             "F.scaled_dot_product_attention(q, k, v, scale=inf)",
             "F.cross_entropy(z, t, ignore_index=0)", "sqrt(-(x * x) - 1)",
             "x * nan_to_num(log(x * 0), 0.0, inf, inf)"]
    shapes = {"m": ["--const", "m=0,0,0"], "q": ["--shape", "q=2,3", "--shape", "k=2,3",
                                              "--shape", "v=2,3"],
              "z": ["--shape", "z=3,4", "--const", "t=0,0,0"]}
    cases = []
    for e in exprs:
        extra = next((v for k, v in shapes.items() if f"{k}," in e or f"({k}" in e
                      or ("=m)" in e and k == "m")), [])
        if "x" in e and "--shape" not in extra and not e.startswith("F.scaled"):
            extra = [*extra, "--shape", "x=3"]
        for command in ("check", "jvp"):
            cases.append(Case("nothing compared", [command, e, *extra], must_fail=True))
    for e in ("sinh(x * 1000)", "pow(x * 1e200, 2) * 1e300"):  # finite at x = 0 only
        cases.append(Case("compared where defined", ["check", e, "--shape", "x=3"]))
    for pad in ("inf", "-inf", "nan"):
        for n in (1, 3):
            cases.append(Case("compared where defined",
                              ["check", f"F.pad(x, ({n}, {n}), value={pad})", "--shape", "x=8"]))
    return cases


HOSTILE = ['[link=x"><svg/onload=alert(1)>]A', "B\x1b[31mred\x1b[0m", "C<b>|`[a](javascript:x)",
           "D[bold]x[/bold]", "E\x07\x08bell", "F$\\alpha$_{x}", "G\u202eRTL\u202c",
           "H\r\n::error::injected", "I%0A::warning::x", "J]]><!--", "K&amp;<script>",
           "L\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"]


def _files(tmp: Path) -> list[Case]:
    cases = []
    for k, name in enumerate(HOSTILE):
        module = tmp / f"hostile_{k}.py"
        module.write_text(
            "import torch\n"
            f"def _f(ctx, x):\n    return x * 2\n"
            f"def _b(ctx, g):\n    return g * 3\n"
            f"Evil = type({name!r}, (torch.autograd.Function,), "
            "{'forward': staticmethod(_f), 'backward': staticmethod(_b)})\n"
            "def named(x):\n    return Evil.apply(x)\n"
            f"def raises(x):\n    raise ValueError({name!r})\n")
        for fmt in ("table", "json", "markdown"):
            cases.append(Case("user text", ["check", f"{module}:named", "--shape", "x=3",
                                            "--format", fmt], must_fail=True))
        cases.append(Case("user text", ["check", f"{module}:raises", "--shape", "x=3"],
                          must_fail=True))
        cases.append(Case("user text", ["graph", f"{module}:named", "--shape", "x=3",
                                        "--svg", str(tmp / f"g{k}.svg")]))
        config = tmp / f"hostile_{k}.toml"
        config.write_text("[tool.gradscope]\n[[tool.gradscope.checks]]\n"
                          f"name = {_toml(name)}\ntarget = \"{module}:named\"\n"
                          "shape = {x = \"3\"}\n")
        cases.append(Case("user text", ["run", str(config), "--co"]))
        cases.append(Case("user text", ["run", str(config), "--junit-xml",
                                        str(tmp / f"j{k}.xml"), "--summary",
                                        str(tmp / f"s{k}.md")], must_fail=True))
        cases.append(Case("user text", ["run", str(config), "--output-format", "github"],
                          must_fail=True))
    return cases


def _toml(text: str) -> str:
    out = "".join(c if c.isprintable() and c not in '"\\' else f"\\u{ord(c):04x}" for c in text)
    return f'"{out}"'


def _parse() -> list[Case]:
    forms = ["max(E, y)", "where(m, E, y)", "x.max(E)", "E.max(y)", "max(E, dim=0).values",
             "maximum(E, y)", "where(E > 0, E, y)", "clamp(E, min=y)"]
    cases = []
    for form in forms:
        doubled = form.count("E") > 1  # (its text doubles per level: kept short)
        for depth in ((4, 6, 8, 9) if doubled else (8, 16, 22, 30)):
            text = "x"
            for _ in range(depth):
                text = form.replace("E", text)
            cases.append(Case("parse", ["check", text, "--shape", "x=3", "--shape", "y=3",
                                        "--const", "m=1,0,1"]))
    return cases


def _sizes() -> list[Case]:
    exprs = [("tensor_split(x, 100000000)[0]", "x=3"), ("chunk(x, 100000)[0]", "x=3"),
             ("round(x, decimals=100000000)", "x=3"), ("round(x, decimals=2147483648)", "x=3"),
             ("round(x, decimals=-2147483648)", "x=3"), ("combinations(x, r=3)", "x=400"),
             ("combinations(x, r=100000)", "x=3"), ("masked_select(x, m).repeat(10000000)", "x=3"),
             ("torch.linalg.vander(x, N=1000000)", "x=1"), ("diff(x, n=2000)", "x=3"),
             ("x.repeat(100000, 100000)", "x=3"), ("outer(x, x).repeat(1000, 1000)", "x=30"),
             ("F.one_hot(t).sum() * x", "x=3"), ("group_norm(x, 0)", "x=2,4"),
             ("kron(x, x)", "x=3000"), ("cdist(x, x)", "x=2000,2"),
             ("avg_pool1d(x, 2)", "x=1,1,20000"), ("lp_pool1d(x, 2.0, 2)", "x=1,1,20000"),
             ("F.interpolate(x, size=2, mode='area')", "x=1,1,30000"),
             ("conv1d(x, w, groups=100000)", "x=1,100000,1"), ("sort(x).values", "x=400000"),
             ("torch.linalg.eigvalsh(x)", "x=600,600"), ("block_diag(x, x)", "x=5000"),
             ("matrix_power(x, 64)", "x=300,300"), ("linalg.pinv(x)", "x=300,300")]
    cases = []
    for e, shape in exprs:
        extra = ["--shape", shape, "--const", "m=1,1,1", "--const", "t=0,100000000"]
        if "groups" in e:
            extra += ["--shape", "w=100000,1,1"]
        cases.append(Case("bounded work", ["check", e, *extra]))
    return cases


def _cache(tmp: Path) -> list[Case]:
    cases = []
    for k, make in enumerate(("fifo", "deep", "huge", "zero", "link", "dangling")):
        folder = tmp / f"cache_{k}"
        (folder / ".gradscope_cache").mkdir(parents=True)
        config = folder / "gradscope.toml"
        config.write_text('[tool.gradscope]\n[[tool.gradscope.checks]]\nname = "sq"\n'
                          'target = "x**2"\n')
        cache = folder / ".gradscope_cache" / "lastfailed.json"
        if make == "fifo":
            os.mkfifo(cache)
        elif make == "deep":
            cache.write_text("[" * 100000 + "]" * 100000)
        elif make == "huge":
            with open(cache, "wb") as handle:
                handle.truncate(6 << 30)
        elif make == "zero":
            cache.symlink_to("/dev/zero")
        elif make == "link":
            (folder / "victim").write_text("keep")
            cache.symlink_to(folder / "victim")
        else:
            (folder / ".gradscope_cache" / ".gitignore").symlink_to(folder / "nowhere" / "x")
        for extra in ([], ["--lf"], ["--co", "--lf"]):
            cases.append(Case("cache", ["run", str(config), *extra]))
    return cases


def _exits(tmp: Path) -> list[Case]:
    module = tmp / "exits.py"
    module.write_text("import sys, atexit, os\nsys.exit = lambda *a: None\n"
                      "atexit.register(lambda: os._exit(0))\n"
                      "def wrong(x):\n    return x * 2 + x.detach() * 0.5\n")
    return [Case("exit status", [c, f"{module}:wrong", "--shape", "x=3"], must_fail=True)
            for c in ("check", "jvp", "jacobian")]


def _case(surface: str, args: list[str], must_fail: bool = False,
          env: dict[str, str] | None = None) -> Case:
    return Case(surface, args, must_fail, dict(env or {}))


def _run(case: Case, limit: float, tmp: Path) -> tuple[str | None, float]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "", **case.env}
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "gradscope", *case.args], cwd=tmp,
                              env=env, capture_output=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return f"ran past {limit:g} s", limit
    took = time.monotonic() - started
    out = (done.stdout + done.stderr).decode("utf-8", "replace")
    if done.returncode == 4 or done.returncode < 0:
        return f"exit {done.returncode}: {out.strip().splitlines()[-1:]}", took
    if case.must_fail and done.returncode == 0:
        return "exit 0 where nothing can pass", took
    # (colour asked for: rich's own SGR codes are styling; any other ESC is raw)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", out) if case.env.get("FORCE_COLOR") else out
    if "\x1b" in shown or ("\u202e" in out and "markdown" in case.args):
        return "a raw ESC in the output", took
    if "markdown" in case.args and ("<svg" in out or "<script" in out or "<b>" in out):
        return "a tag from user text in markdown", took
    if "github" in case.args and any(line and not line.startswith("::")
                                     for line in done.stdout.decode().splitlines()):
        return "a line that is no annotation", took
    return None, took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=float, default=90.0)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        cases = [*_nothing_compared(), *_files(tmp), *_parse(), *_sizes(), *_cache(tmp),
                 *_exits(tmp), *modern(_case, tmp)]
        cases = [c for c in cases if c.surface.startswith(args.only)]
        counts: dict[str, list[int]] = {}
        for case in cases:
            broken, took = _run(case, args.limit, tmp)
            tally = counts.setdefault(case.surface, [0, 0])
            tally[0] += 1
            if broken:
                tally[1] += 1
                shown = " ".join(map(repr, case.args))
                print(f"BROKEN ({broken}, {took:.1f} s): gradscope {shown}")
        for surface, (n, bad) in counts.items():
            print(f"{surface:24} {n:4} cases  {bad:3} broken")
        total = sum(n for n, _ in counts.values())
        broken = sum(b for _, b in counts.values())
        print(f"{'all':24} {total:4} cases  {broken:3} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
