"""Whether a model's check fits in float64, and the model's own dtype where it does not.

A check in float64 (the default) holds, beside the user's model, a float64 copy of its
parameters, their float64 gradients and a float64 perturbed copy at a time: about
FLOAT64_BYTES_PER_PARAMETER bytes per parameter at its peak (measured on GPT-2 small). A model of
10⁹ float32 parameters then needs about 40 GB more, and on a machine with less the operating
system ends the process: no report, and no word of why. Where the float64 check of a module's
parameters needs more than the memory the device has free, the check runs in the parameters'
own dtype instead — autograd and finite differences alike (a float64 reference of the model would
be the copy that does not fit) — holding the parameters once (gradscope's copy of the module
shares their storage), their gradients and one perturbed copy at a time. A note says so, with
both figures.

What it cannot see: finite differences of a float32 model resolve about 10⁻³ of a gradient,
so the projections over every tensor miss an error of 1 % of the gradient's norm that float64
sees (GPT-2 small's 1 %-off GELU); a custom autograd.Function is still checked per call in
float64 (its own inputs, a few activations), and a wrong one is named."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

# extra bytes per parameter a float64 check holds at its peak, beside the model itself (GPT-2
# small, 124M float32 parameters: 5.3 GB peak resident, 0.5 GB of it the model and 0.3 GB
# torch itself; the 2-layer Llama shape, 167M: 7.5 GB; benchmarks/models.py --scale,
# 2026-11-27)
FLOAT64_BYTES_PER_PARAMETER = 40
LOW = (torch.float32, torch.float16, torch.bfloat16)
MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class Fit:
    """The dtype a check runs in instead of float64, and the note that says why."""

    dtype: str
    note: str


def fitted(parameters: Mapping[str, torch.Tensor], dtype: str, device: torch.device
           ) -> Fit | None:
    """The parameters' own dtype where a float64 check (`dtype`) of them would need more
    memory than `device` has free; None where it fits, where the check is in another dtype
    already, or where the parameters are not all of one lower floating dtype."""
    if dtype != "float64" or not parameters:
        return None
    own = {p.dtype for p in parameters.values()}
    if len(own) != 1 or next(iter(own)) not in LOW:
        return None
    count = sum(p.numel() for p in parameters.values())
    needed = FLOAT64_BYTES_PER_PARAMETER * count
    free = available(device)
    if free is None or needed <= free:
        return None
    name = str(next(iter(own))).removeprefix("torch.")
    return Fit(name, (
        f"checked in {name}, the parameters' own dtype: a float64 check of their {count:,} "
        f"elements needs about {_size(needed)} beside the model and {device.type} has "
        f"{_size(free)} free. Autograd and finite differences both ran in "
        f"{name} (tolerances follow it): errors of less than about 1 % of the gradient may go "
        "unseen by the projections over every tensor; custom autograd.Functions were still "
        "checked per call in float64. On a machine with more memory, float64 sees more"))


def _size(count: int) -> str:
    return f"{count / 2**30:.1f} GiB" if count >= 2**30 else f"{count / 2**20:.1f} MiB"


def available(device: torch.device) -> int | None:
    """Bytes `device` can still give (a GPU's free memory; the system's MemAvailable on the
    CPU, where Linux tells it); None where nobody says."""
    if device.type == "cuda":
        try:
            return int(torch.cuda.mem_get_info(device)[0])
        except (RuntimeError, AssertionError):
            return None
    try:
        for line in MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
