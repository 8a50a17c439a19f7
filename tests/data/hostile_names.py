"""User text meant to be read as markup or terminal control: a custom Function's class name,
a module's parameter name and an exception's message (every output shows them as data)."""

import torch

NAME = '[link=x"><svg/onload=alert(1)>]Sq\x1b[31mRED<b>|`[a](javascript:alert(1))'


def _forward(ctx, x):
    return x * 2


def _backward(ctx, g):
    return g * 3  # 1.5 × the derivative: the report names this class


Evil = type(NAME, (torch.autograd.Function,),
            {"forward": staticmethod(_forward), "backward": staticmethod(_backward)})


def named(x):
    return Evil.apply(x)


def raises(x):
    raise ValueError(NAME)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_parameter(NAME, torch.nn.Parameter(torch.ones(3, dtype=torch.float64)))

    def forward(self, x):
        return Evil.apply(getattr(self, NAME) * x)
