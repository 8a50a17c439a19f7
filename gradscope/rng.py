"""How gradscope draws its own random numbers: a seed per purpose, derived from the run's seed and
a label, so adding an input or a check never changes the numbers of another. Two older draws
seed a generator with the run's seed itself — the elements a finite-difference sample picks
(engines/fd/sampler.py) and the elements a coarse-scale line runs through
(features/surrogates.py) — and the gradcheck drop-in draws with torch's own fixed seeds
(testing/), so that its directions are the ones torch's gradcheck takes."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterator
from contextlib import contextmanager

import torch


def seed_for(seed: int, label: str) -> int:
    """A seed for one purpose (an input's name, ':upstream0', ':sample:x', ...)."""
    digest = hashlib.sha256(f"{seed}:{label}".encode()).hexdigest()
    return int(digest[:12], 16)


def generator(seed: int, label: str, device: torch.device | None = None) -> torch.Generator:
    """A CPU generator seeded for `label` (draw on the CPU, then move: the same numbers on
    every device). `device` a GPU: a generator there, for draws the size of a model (the CPU
    of a GPU machine draws 10⁹ numbers in about 20 s, the GPU in milliseconds): the same
    numbers on every run on that kind of device, other numbers than the CPU's."""
    if device is not None and device.type != "cpu":
        return torch.Generator(device=device).manual_seed(seed_for(seed, label))
    return torch.Generator().manual_seed(seed_for(seed, label))


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Everything gradscope creates or calls draws from `seed`: module construction, the
    user's code using torch's or Python's global generator; both are restored afterwards, so
    a check neither depends on nor changes the caller's random state."""
    state = random.getstate()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        random.seed(seed)
        try:
            yield
        finally:
            random.setstate(state)
