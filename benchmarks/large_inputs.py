"""The drop-in's fast mode against torch's on large inputs: a 3-layer CNN (ReLU, tanh) on
images of growing size, right and with a 0.1 % backward error injected at its input, one
process, best of `--repeat`. Prints one JSON row per size and bug, with the ratio to torch's
`fast_mode=True` (the issue's bar: 1.5× on inputs of any size):

    python benchmarks/large_inputs.py [--threads 1] [--repeat 2] [--sizes 64,128,256]

The injected error, the timing and the verdicts are gradcheck_suite.py's. Timings are never
asserted."""

from __future__ import annotations

import argparse
import json
from functools import partial

import torch
from gradcheck_suite import TORCH_GRADCHECK, _injected, _named, _timed


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.Tanh(),
        torch.nn.Conv2d(8, 2, 3, padding=1)).double()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--sizes", default="64,128,256")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    net = _net()
    for size in (int(s) for s in args.sizes.split(",")):
        gen = torch.Generator().manual_seed(size)
        img = torch.randn(1, 3, size, size, generator=gen, dtype=torch.float64,
                          requires_grad=True)
        for bug in (False, True):
            call = (_injected(net) if bug else net, (img,))
            theirs, t_torch = _timed(partial(TORCH_GRADCHECK, *call, fast_mode=True,
                                             raise_exception=False), args.repeat)
            ours, named, t_ours = _named(call, True, args.repeat)
            print(json.dumps({"image": f"3x{size}x{size}", "bug": bug, "torch": theirs,
                              "gradscope": ours, "named": named,
                              "torch_s": round(t_torch, 4), "gradscope_s": round(t_ours, 4),
                              "ratio": round(t_ours / t_torch, 2)}))


if __name__ == "__main__":
    main()
