"""Gradient hooks registered before any check runs, in a module's __init__: on a parameter
(`register_hook`), as a module's full backward hook and full backward pre-hook. Each model is
built twice: `scale=1.0` (the hook returns the gradient unchanged) and `scale=0.5` (it halves
it, a bug the check must place at the line that registered the hook)."""

import torch
from torch import nn


def _scaled(scale: float):
    return lambda grads: tuple(g * scale if g is not None else None for g in grads)


class TwoLayers(nn.Module):
    """The model every hooked variant shares: no hook of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(4, 8), nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.tanh(self.fc1(x))).sum()


class ParamHooked(TwoLayers):
    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.fc1.weight.register_hook(lambda g: g * scale)  # the parameter's hook


class ModuleHooked(TwoLayers):
    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        scaled = _scaled(scale)
        self.fc2.register_full_backward_hook(lambda m, gin, gout: scaled(gin))  # module hook


class PreHooked(TwoLayers):
    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        scaled = _scaled(scale)
        self.fc1.register_full_backward_pre_hook(lambda m, gout: scaled(gout))  # pre-hook


torch.manual_seed(0)
param_ok, param_bad = ParamHooked(1.0), ParamHooked(0.5)
module_ok, module_bad = ModuleHooked(1.0), ModuleHooked(0.5)
pre_ok, pre_bad = PreHooked(1.0), PreHooked(0.5)


def param_loss(x: torch.Tensor) -> torch.Tensor:
    """A training-style function over the module with the halving parameter hook."""
    return param_bad(x) * 2
