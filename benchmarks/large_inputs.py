"""The drop-in's fast mode against torch's on large inputs, one process, best of `--repeat`:
a 3-layer CNN (ReLU, tanh) on images of growing size, and — where kornia is installed
(0.9.0rc1, as benchmarks/library_suite.py pins it) — real feature networks at the inputs of
their own gradcheck tests and larger (KeyNet, a keypoint detector, on whole images; HardNet,
SOSNet and TFeat, descriptors, on batches of 32×32 patches; their weights random, their
gradcheck arguments kornia's own), each right and with a 0.1 % backward error injected at its
input. Prints one JSON row per network, size and bug, with the ratio to torch's
`fast_mode=True` (the issue's bar: 1.5× on inputs of any size):

    python benchmarks/large_inputs.py [--threads 1] [--repeat 2] [--sizes 64,128,256]
        [--no-kornia]

The injected error, the timing and the verdicts are gradcheck_suite.py's. Timings are never
asserted. The first call in the process that torch's verdict decides asks torch's own
gradcheck (the drop-in's replay of its fast mode proves itself once): --repeat 2 shows both."""

from __future__ import annotations

import argparse
import importlib.util
import json
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import torch
from gradcheck_suite import TORCH_GRADCHECK, _injected, _named, _timed

KORNIA_KW = {"eps": 1e-4, "atol": 1e-4, "nondet_tol": 1e-8}  # (their tests' arguments)


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.Tanh(),
        torch.nn.Conv2d(8, 2, 3, padding=1)).double()


def _cases(sizes: list[int], kornia: bool) -> Iterator[tuple[str, Callable[..., Any],
                                                               tuple[int, ...], dict]]:
    net = _net()
    for size in sizes:
        yield "cnn", net, (1, 3, size, size), {}
    if not kornia or importlib.util.find_spec("kornia") is None:
        return
    import kornia.feature as kf

    torch.manual_seed(0)
    keynet = kf.KeyNet(pretrained=False).double().eval()
    # (at random weights its last conv's outputs are negative and its final ReLU cuts every
    # score: a zero function, nothing to check; a bias of 1 keeps them)
    keynet.last_conv[0].bias.data.fill_(1.0)
    for size in (16, *sizes):  # (16: the shape of kornia's own test)
        yield "kornia KeyNet", keynet, (1, 1, size, size), KORNIA_KW
    for name in ("HardNet", "SOSNet", "TFeat"):
        descriptor = getattr(kf, name)(pretrained=False).double().eval()
        for batch in (2, 64):  # (2: kornia's own test)
            yield f"kornia {name}", descriptor, (batch, 1, 32, 32), KORNIA_KW


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--sizes", default="64,128,256")
    parser.add_argument("--no-kornia", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    sizes = [int(s) for s in args.sizes.split(",")]
    for name, net, shape, kw in _cases(sizes, not args.no_kornia):
        gen = torch.Generator().manual_seed(shape[-1])
        draw = torch.randn if name == "cnn" else torch.rand  # (kornia's tests draw rand)
        img = draw(*shape, generator=gen, dtype=torch.float64).requires_grad_(True)
        for bug in (False, True):
            call = (_injected(net) if bug else net, (img,))
            theirs, t_torch = _timed(partial(TORCH_GRADCHECK, *call, fast_mode=True,
                                             raise_exception=False, **kw), args.repeat)
            ours, named, t_ours = _named(call, True, args.repeat, **kw)
            print(json.dumps({"network": name, "input": "x".join(map(str, shape)), "bug": bug,
                              "torch": theirs, "gradscope": ours, "named": named,
                              "torch_s": round(t_torch, 4), "gradscope_s": round(t_ours, 4),
                              "ratio": round(t_ours / t_torch, 2)}), flush=True)


if __name__ == "__main__":
    main()
