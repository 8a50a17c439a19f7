"""Real architectures, small: gradscope with default options beside torch's gradcheck fast mode
on the same loss, the same inputs, in one process. Models (tests/data/zoo_conv.py,
zoo_seq.py, gpt.py): ResNet, U-Net, VAE, LSTM LM, GCN, Mixtral-style MoE, ViT, nanoGPT — each
correct and with a planted bug. gradcheck gets a float64 copy of every parameter and float
input as leaves (through `torch.func.functional_call`); gradscope gets what a user gives it.

    python benchmarks/zoo.py [--threads 2] [--only NAME ...] [--no-gradcheck]

Prints one JSON row per (model, variant, tool) and a table with the ratio gradscope /
gradcheck fast; timings are never asserted anywhere."""

from __future__ import annotations

import argparse
import inspect
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "data"))
import gpt
import zoo_conv
import zoo_seq

import gradscope

TORCH_GRADCHECK = sys.modules["torch.autograd.gradcheck"].gradcheck


def _seeded(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@dataclass(frozen=True)
class Case:
    name: str
    models: tuple[nn.Module, nn.Module]  # correct, buggy
    losses: tuple[Callable[..., torch.Tensor], Callable[..., torch.Tensor]]
    inputs: Callable[[], dict[str, torch.Tensor]]  # float: checked
    consts: Callable[[], dict[str, torch.Tensor]]  # data
    mode: str | None = None


def _images(shape: tuple[int, ...]) -> Callable[[], Any]:
    """A float input `x` of this shape, seeded."""
    return lambda: {"x": torch.randn(*shape, generator=_seeded())}


CASES = [
    Case("ResNet", (zoo_conv.resnet, zoo_conv.resnet_bad),
         (zoo_conv.resnet_loss, zoo_conv.resnet_bad_loss), _images((4, 3, 16, 16)),
         lambda: {"labels": torch.randint(0, 10, (4,), generator=_seeded(1))}),
    Case("U-Net", (zoo_conv.unet, zoo_conv.unet_bad),
         (zoo_conv.unet_loss, zoo_conv.unet_bad_loss), _images((2, 1, 16, 16)), dict),
    Case("VAE", (zoo_conv.vae, zoo_conv.vae_bad), (zoo_conv.vae_loss, zoo_conv.vae_bad_loss),
         lambda: {"x": torch.rand(4, 1, 16, 16, generator=_seeded())},
         lambda: {"eps": torch.randn(4, 8, generator=_seeded(1))}),
    Case("LSTM LM", (zoo_seq.lstm, zoo_seq.lstm_bad),
         (zoo_seq.lstm_loss, zoo_seq.lstm_bad_loss), dict,
         lambda: {"tokens": torch.randint(0, 50, (4, 17), generator=_seeded())}),
    Case("GCN", (zoo_seq.gcn, zoo_seq.gcn_bad), (zoo_seq.gcn_loss, zoo_seq.gcn_bad_loss),
         _images((64, 48)),
         lambda: {"adj": torch.randn(64, 64, generator=_seeded(1)),
                  "labels": torch.randint(0, 12, (64,), generator=_seeded(2))}, "eval"),
    Case("MoE", (zoo_seq.moe, zoo_seq.moe_bad), (zoo_seq.moe_loss, zoo_seq.moe_bad_loss),
         _images((2, 16, 32)), dict),
    Case("ViT", (zoo_seq.vit, zoo_seq.vit_bad), (zoo_seq.vit_loss, zoo_seq.vit_bad_loss),
         _images((4, 3, 16, 16)),
         lambda: {"labels": torch.randint(0, 10, (4,), generator=_seeded(1))}),
    Case("nanoGPT", (gpt.tiny, gpt.tiny_off), (gpt.tiny_loss, gpt.tiny_off_loss), dict,
         lambda: {"tokens": torch.randint(0, 97, (2, 9), generator=_seeded())}),
]


class _Objective(nn.Module):
    """The user's loss over a module it reaches as a global: `functional_call` on this wrapper
    swaps the global module's parameters for gradcheck's leaves."""

    def __init__(self, model: nn.Module, loss: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.model, self.loss = model, loss

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return self.loss(*args)


def _gradcheck(case: Case, bad: int) -> tuple[bool, float, int]:
    model, loss = case.models[bad], case.losses[bad]
    wrapper = _Objective(model, loss)
    if case.mode == "eval":
        wrapper.eval()
    wrapper.double()
    inputs = {k: v.double().requires_grad_() for k, v in case.inputs().items()}
    consts = {k: v.double() if v.is_floating_point() else v for k, v in case.consts().items()}
    names = [n for n, _ in wrapper.named_parameters()]
    params = [p.detach().clone().requires_grad_() for _, p in wrapper.named_parameters()]
    order = list(inspect.signature(loss).parameters)

    def f(*leaves: torch.Tensor) -> torch.Tensor:
        given = dict(zip(inputs, leaves[:len(inputs)], strict=True)) | consts
        swapped = dict(zip(names, leaves[len(inputs):], strict=True))
        return torch.func.functional_call(wrapper, swapped, tuple(given[k] for k in order))

    started = time.perf_counter()
    ok = TORCH_GRADCHECK(f, (*inputs.values(), *params), fast_mode=True, raise_exception=False)
    wall = time.perf_counter() - started
    wrapper.float()
    wrapper.train()
    return ok, wall, sum(p.numel() for p in params) + sum(t.numel() for t in inputs.values())


def _gradscope(case: Case, bad: int) -> tuple[gradscope.Report, float]:
    started = time.perf_counter()
    report = gradscope.check(case.losses[bad], const=case.consts(), mode=case.mode,
                             **case.inputs())
    return report, time.perf_counter() - started


def rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    out = []
    for case in CASES:
        if args.only and case.name not in args.only:
            continue
        params = sum(p.numel() for p in case.models[0].parameters())
        for bad, variant in ((0, "correct"), (1, "bug")):
            report, wall = _gradscope(case, bad)
            row = {"model": case.name, "variant": variant, "parameters": params,
                   "gradscope_passed": report.passed, "gradscope_s": round(wall, 2),
                   "failures": [str(f)[:160] for f in report.failures],
                   "coverage": report.coverage}
            if not args.no_gradcheck:
                ok, gc_wall, _ = _gradcheck(case, bad)
                row |= {"gradcheck_fast_passed": ok, "gradcheck_fast_s": round(gc_wall, 2),
                        "ratio": round(wall / max(gc_wall, 1e-9), 2)}
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--only", nargs="*", default=[], help="model names (ResNet, …)")
    parser.add_argument("--no-gradcheck", action="store_true", help="gradscope only")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    table = rows(args)
    print(f"\n{'model':10} {'variant':8} {'gradscope':>10} {'s':>8} {'gradcheck':>10} "
          f"{'s':>8} {'ratio':>6}")
    for r in table:
        print(f"{r['model']:10} {r['variant']:8} {r['gradscope_passed']!s:>10} "
              f"{r['gradscope_s']:8.2f} {r.get('gradcheck_fast_passed', '')!s:>10} "
              f"{r.get('gradcheck_fast_s', 0):8.2f} {r.get('ratio', ''):>6}")


if __name__ == "__main__":
    main()
