"""F.grid_sample on 4-D inputs (bilinear and nearest; zeros, border and reflection padding;
align_corners), differentiated in both the image and the grid by writing the sampling out on
plain tensors: each output pixel's grid point mapped to the image's pixel coordinates (torch's
unnormalisation, clipping and reflection, with their derivatives), its four neighbours and
bilinear weights. The image's adjoint adds the upstream back to the neighbours by weight; the
grid's is the weights' derivative along x and y. Crossing a pixel boundary is a kink."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from gradscope.expr.ops.base import KINK, Op, Tensor, structural


def _reflect(pos: Tensor, low2: float, high2: float) -> tuple[Tensor, Tensor]:
    """torch's reflect_coordinates, with the derivative's sign."""
    if low2 == high2:
        return torch.zeros_like(pos), torch.zeros_like(pos)
    low, span = low2 / 2, (high2 - low2) / 2
    shifted = pos - low
    sign = torch.where(shifted < 0, -1.0, 1.0).to(pos.dtype)
    shifted = shifted.abs()
    extra, flips = torch.fmod(shifted, span), torch.floor(shifted / span)
    even = torch.remainder(flips, 2) == 0
    return (torch.where(even, extra + low, span - extra + low),
            torch.where(even, sign, -sign))


def _source(coord: Tensor, size: int, p: dict) -> tuple[Tensor, Tensor]:
    """The pixel coordinate a grid coordinate samples, and its derivative."""
    align, padding = p.get("align_corners") or False, p.get("padding_mode", "zeros")
    if align:
        pos, slope = (coord + 1) / 2 * (size - 1), torch.full_like(coord, (size - 1) / 2)
    else:
        pos, slope = ((coord + 1) * size - 1) / 2, torch.full_like(coord, size / 2)
    if padding == "reflection":
        pos, sign = _reflect(pos, 0.0, 2.0 * (size - 1)) if align else \
            _reflect(pos, -1.0, 2.0 * size - 1)
        slope = slope * sign
    if padding in ("border", "reflection"):  # clipped to the image; no gradient outside
        inside = (pos > 0) & (pos < size - 1)
        pos = pos.clamp(0, size - 1)
        slope = slope * inside.to(pos.dtype)
    return pos, slope


def _taps(x: Tensor, grid: Tensor, p: dict) -> dict[str, Any]:
    """Each output pixel's neighbours: flat indices, validity, weights and coordinates."""
    h, w = x.shape[-2:]
    ix, dx = _source(grid[..., 0], w, p)
    iy, dy = _source(grid[..., 1], h, p)
    if p.get("mode", "bilinear") == "nearest":
        cols, rows = torch.round(ix), torch.round(iy)
        taps = [(cols, rows, torch.ones_like(ix))]
    else:
        x0, y0 = torch.floor(ix), torch.floor(iy)
        fx, fy = ix - x0, iy - y0
        taps = [(x0, y0, (1 - fx) * (1 - fy)), (x0 + 1, y0, fx * (1 - fy)),
                (x0, y0 + 1, (1 - fx) * fy), (x0 + 1, y0 + 1, fx * fy)]
    out = []
    for cols, rows, weight in taps:
        valid = (cols >= 0) & (cols < w) & (rows >= 0) & (rows < h)
        index = (rows.clamp(0, h - 1) * w + cols.clamp(0, w - 1)).long()
        out.append((index.flatten(1), valid.flatten(1).to(x.dtype), weight.flatten(1)))
    return {"taps": out, "ix": ix, "iy": iy, "dx": dx, "dy": dy}


def _values(x: Tensor, index: Tensor) -> Tensor:
    """x's (N, C, H*W) values at (N, P) flat indices, as (N, C, P)."""
    flat = x.flatten(2)
    return flat.gather(2, index.unsqueeze(1).expand(-1, flat.shape[1], -1))


def _slopes(x: Tensor, found: dict[str, Any]) -> tuple[Tensor, Tensor]:
    """d out / d ix and d out / d iy (bilinear), per channel and output pixel (N, C, P)."""
    v = [_values(x, i) * ok.unsqueeze(1) for i, ok, _ in found["taps"]]
    fx = (found["ix"] - torch.floor(found["ix"])).flatten(1).unsqueeze(1)
    fy = (found["iy"] - torch.floor(found["iy"])).flatten(1).unsqueeze(1)
    return ((v[1] - v[0]) * (1 - fy) + (v[3] - v[2]) * fy,
            (v[2] - v[0]) * (1 - fx) + (v[3] - v[1]) * fx)


def _vjp(g: Tensor, out: Tensor, args: Sequence[Tensor], p: dict) -> list[Tensor]:
    x, grid = args
    found = _taps(x, grid, p)
    gflat = g.flatten(2)  # (N, C, P)
    gx = torch.zeros_like(x.flatten(2))
    for index, valid, weight in found["taps"]:
        part = gflat * (weight * valid).unsqueeze(1)
        gx = gx.scatter_add(2, index.unsqueeze(1).expand_as(part), part)
    ggrid = torch.zeros_like(grid)
    if p.get("mode", "bilinear") != "nearest":
        along_x, along_y = _slopes(x, found)
        shape = grid.shape[:-1]
        ggrid = torch.stack([(along_x * gflat).sum(1).reshape(shape) * found["dx"],
                             (along_y * gflat).sum(1).reshape(shape) * found["dy"]], -1)
    return [gx.reshape(x.shape), ggrid]


def _jvp(ts: Sequence[Any], out: Tensor, args: Sequence[Tensor], p: dict) -> Tensor:
    x, grid = args
    tx = torch.zeros_like(x) if ts[0] is None else ts[0].expand_as(x)
    total = _grid_sample(tx, grid, **p)
    if ts[1] is not None and p.get("mode", "bilinear") != "nearest":
        # the grid's tangent moves each sampling point: the slopes times the move
        tg = ts[1].expand_as(grid)
        found = _taps(x, grid, p)
        along_x, along_y = _slopes(x, found)
        move_x = (tg[..., 0] * found["dx"]).flatten(1).unsqueeze(1)
        move_y = (tg[..., 1] * found["dy"]).flatten(1).unsqueeze(1)
        total = total + (along_x * move_x + along_y * move_y).reshape(out.shape)
    return total


def _branch(x: Tensor, grid: Tensor, **p: Any) -> Tensor:
    """The pixel cell each grid point falls in (its rounding for nearest): a kink or a jump
    where it changes."""
    found = _taps(x, grid, p)
    cell = found["taps"][0][0].reshape(grid.shape[:-1])
    return cell.unsqueeze(1).expand(-1, x.shape[1], *cell.shape[1:])


def _grid_sample(x: Tensor, grid: Tensor, mode: str = "bilinear",
                 padding_mode: str = "zeros", align_corners: bool | None = None) -> Tensor:
    return F.grid_sample(x, grid, mode, padding_mode, align_corners)


CHOICES = {"mode": ("bilinear", "nearest"), "padding_mode": ("zeros", "border", "reflection")}

ROWS: list[Op] = [
    structural("grid_sample", _grid_sample, "F.grid_sample(x, grid, mode='bilinear', "
               "padding_mode='zeros', align_corners=None) of a 4-D x (bilinear, nearest)",
               "input, grid, mode: str = 'bilinear', padding_mode: str = 'zeros', "
               "align_corners: bool = None", CHOICES, vjp=_vjp, jvp=_jvp, branch=_branch,
               kink=KINK),
]

# The family `gradscope ops` lists these rows under (expr/ops/__init__.py reads it).
BY_FAMILY = {"convolution and pooling": ROWS}
