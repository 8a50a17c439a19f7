"""Functions shaped like a computer-vision library's (kornia's) gradient tests: a function that
validates its input's geometry and refuses a point moved too far, and a descriptor whose input
normalisation detaches its statistics."""

from __future__ import annotations

import torch

WIDTH = 1024
_W = torch.randn(WIDTH, 32, generator=torch.Generator().manual_seed(0),
                 dtype=torch.float64) / WIDTH ** 0.5


def _check_cube(x: torch.Tensor) -> None:
    widths = x[1::2] - x[0::2]
    if not torch.allclose(widths, widths[0].expand_as(widths)):  # (kornia's validate_bbox3d)
        raise AssertionError(f"boxes must be cubes, got widths {widths.tolist()}")


def cube_volume(x: torch.Tensor) -> torch.Tensor:
    """The cube's volume from its corner coordinates (pairs: low, high per axis); every
    element moved at once by more than allclose's 1e-5 is no cube."""
    _check_cube(x)
    return (x[1::2] - x[0::2]).prod()


def cube_volume_bug(x: torch.Tensor) -> torch.Tensor:
    """cube_volume with a backward that forgets one axis's factor."""
    _check_cube(x)
    return _VolumeBug.apply(x)


class _VolumeBug(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x[1::2] - x[0::2]).prod()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        w = x[1::2] - x[0::2]
        d = torch.stack([w[1] * w[2], w[0] * w[2], w[0]])  # the bug: w[0] * w[1] is w[0]
        out = torch.zeros_like(x)
        out[1::2], out[0::2] = g * d, -g * d
        return out


def detached_norm(x: torch.Tensor) -> torch.Tensor:
    """Rows centred by their mean with the mean detached (HardNet's input norm), projected,
    squashed and L2-normalised: its gradient is off along each row's constant direction,
    which torch's fast mode (one projection) passes at eps=atol=1e-4 and its slow mode
    fails."""
    mean = x.mean(dim=-1, keepdim=True).detach()
    return torch.nn.functional.normalize(torch.tanh((x - mean) @ _W), dim=-1)
