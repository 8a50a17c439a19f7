"""The judge of one run: compares autograd with the other engines for any upstream, with the
masks finite differences carry (kinks, samples), the re-marking the diagnoses decided
(surrogate inputs, vanishing inputs), and the two-point estimates a comparison doubted.

It owns the work every named check shares and computes it once: the seeded random upstreams and
autograd's VJP for each, and the Jacobians of autograd and of the symbolic engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from gradscope.engines.fd import Estimate, FiniteDifferences
from gradscope.inputs.text import seed_for
from gradscope.report.status import MISMATCH
from gradscope.verdict.compare import Comparison, compare
from gradscope.verdict.tolerance import Tolerance

RANDOM_UPSTREAMS = 2  # extra seeded upstream vectors behind every `check` verdict...
ONE_RANDOM_UPSTREAM_FROM = 1 << 16  # ...one for outputs this large: a single vector already
# weighs every output element independently, and a second costs a backward and compares


@dataclass
class Judge:
    """Compares per input; `autograd` and `symbolic` are the engines (symbolic may be None),
    `estimates` the finite-difference result per input (None where it did not run)."""

    names: tuple[str, ...]
    autograd: Any
    symbolic: Any
    fd: FiniteDifferences | None
    estimates: Mapping[str, Estimate | None]
    tol: Tolerance
    seed: int
    surrogates: set[str] = field(default_factory=set)
    vanishing: set[str] = field(default_factory=set)
    # two-point finite-difference estimates a comparison doubted: refined, then judged again
    suspects: dict[str, torch.Tensor] = field(default_factory=dict)
    _random: list[tuple[torch.Tensor, dict[str, torch.Tensor]]] = field(default_factory=list)
    _jacobian: tuple[Any, Any] | None = None

    def compare(self, name: str, ag: torch.Tensor, sym: torch.Tensor | None,
                fd: torch.Tensor | None, err: torch.Tensor | None,
                jacobian: bool = False) -> Comparison:
        """Compare one input's arrays: a VJP (input-shaped), or with `jacobian` its
        (out_numel, in_numel) Jacobian, whose columns carry the input's kink/sample masks."""
        est = self.estimates[name]
        kink = checked = None
        if est is not None:
            kink = est.kink.reshape(1, -1) if jacobian else est.kink
            if est.sampled is not None:
                checked = est.checked.reshape(1, -1) if jacobian else est.checked
        cmp = compare(ag, sym, fd, err, kink, self.tol, checked)
        if est is not None and est.points is not None and fd is not None:
            self._doubt(name, est, cmp, jacobian)
        if name in self.surrogates and fd is not None and err is not None:
            cmp = cmp.surrogate(fd, err, self.tol)
        if name in self.vanishing and not jacobian:  # zero Jacobian entries are ordinary
            cmp = cmp.vanishing(ag)
        return cmp

    def _doubt(self, name: str, est: Estimate, cmp: Comparison, jacobian: bool) -> None:
        """Remember the two-point estimates behind this comparison's mismatches."""
        if not cmp.counts().get("mismatch"):
            return
        mismatch = cmp.status == MISMATCH
        if jacobian:  # (out, in): a column is doubted when any of its entries is
            mismatch = mismatch.any(0)
        doubted = mismatch.reshape(est.points.shape).to(est.points.device) & (est.points == 2)
        if bool(doubted.any()):
            self.suspects[name] = self.suspects[name] | doubted if name in self.suspects \
                else doubted

    def refine_suspects(self) -> bool:
        """Four-point estimates for every doubted two-point one; True when any changed."""
        refined = 0
        for name, mask in self.suspects.items():
            refined += self.fd.refine(name, mask) if self.fd is not None else 0
        self.suspects = {}
        return refined > 0

    def random_upstreams(self) -> list[tuple[torch.Tensor, dict[str, torch.Tensor]]]:
        """The seeded random upstream vectors and autograd's VJP for each, computed once."""
        if not self._random:
            output = self.autograd.output
            count = RANDOM_UPSTREAMS if output.numel() < ONE_RANDOM_UPSTREAM_FROM else 1
            for k in range(count):
                gen = torch.Generator().manual_seed(seed_for(self.seed, f":upstream{k}"))
                # uniform(-1, 1): mixed signs and scales, never larger than the ones upstream
                # whose absolute tolerance it shares; drawn in float32 (randn in float64
                # costs seven times as much at a million elements)
                v = torch.rand(output.shape, generator=gen).to(torch.float64)
                v = v.mul_(2.0).sub_(1.0).to(output.device)
                self._random.append((v, self.autograd.vjp(v.to(output.dtype))))
        return self._random

    def jacobians(self) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor] | None,
                                 dict[str, tuple[torch.Tensor, torch.Tensor] | None]]:
        """Autograd's and the symbolic engine's Jacobians, computed once, and the finite
        differences' (read fresh: refinement may still change them)."""
        if self._jacobian is None:
            autograd, symbolic = self.autograd, self.symbolic
            sym = None
            if symbolic is not None:
                n_out = autograd.output.numel()
                basis = torch.eye(n_out, dtype=torch.float64, device=autograd.output.device)
                rows = [symbolic.vjp(b.reshape(autograd.output.shape)) for b in basis]
                sym = {n: torch.stack([r[n].reshape(-1) for r in rows]) for n in self.names}
            self._jacobian = (autograd.jacobian(), sym)
        fd = {n: e.jacobian() if e else None for n, e in self.estimates.items()}
        return self._jacobian[0], self._jacobian[1], fd

    def jacobian_comparisons(self) -> dict[str, Comparison]:
        ag, sym, fd = self.jacobians()
        out = {}
        for n in self.names:
            jac, err = fd[n] if fd[n] else (None, None)
            out[n] = self.compare(n, ag[n], sym[n] if sym else None, jac, err, jacobian=True)
        return out
