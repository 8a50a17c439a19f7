"""--compile targets of the fifth attack: one that computes another function when
compiled, one that refuses compilation, a backend that fails (benchmarks/attack_modern.py
writes this file with `attack_t` spelled `attack`)."""

import torch


def smooth(x):
    return torch.tanh(x) * x.sin()

def breaks(x):
    y = x.sin()
    print("[bold red]a graph break[/] <b>x</b> \x1b[31m")
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
    raise RuntimeError("[red]this backend fails[/red] \x1b[2J")

def markup_backend(gm, example_inputs):
    return gm.forward

if "attack_t_failing" not in torch.compiler.list_backends(exclude_tags=()):
    # (a file read again in one process registers its backend once)
    torch._dynamo.register_backend(failing_backend, name="attack_t_failing")
