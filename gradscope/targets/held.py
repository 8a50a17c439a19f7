"""The parameters a module holds while gradscope evaluates it: a swap that holds for the whole
forward AND backward. `torch.func.functional_call` swaps the tensors in for the forward only,
and code that reads `self.weight` later — a reversible block whose Function re-runs its
sub-modules inside backward (torch_geometric's GroupAddRev), a Function that keeps its module
in `ctx` — then meets the module's own parameters in backward instead of the tensors autograd
differentiates, and raises or answers for others. Here each evaluation's tensors are put in the
module's parameter slots (every name a tied tensor is reached by) and stay there until the next
evaluation, or a backward of an earlier graph puts that graph's back (`hold`), or the check
ends (`restore`: the module's own parameters, exactly, the same objects). An evaluation that
made no graph (its output requires no grad: finite differences) has no backward to re-run
it, so what the slots held before it is put back when it returns (`lent`, `given_back`): a
model-sized perturbed copy of the parameters was otherwise kept alive by the slots until the
next call, beside the next perturbed copy (a 10⁹ Llama's projections on a GPU held 8 bytes
per parameter more for it).

A tensor that cannot stay once its call returns — a batched one inside `vmap`, a functorch
transform's — is swapped for the call alone (`holdable` says which)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch


def holdable(t: torch.Tensor) -> bool:
    """Whether `t` is an ordinary tensor that may stay in a module past a call (a functorch
    wrapper — vmap's batched tensor, a transform's — has no storage of its own)."""
    try:
        t.untyped_storage()
    except (NotImplementedError, RuntimeError):
        return False
    return True


class Slots:
    """A module's parameter slots, by the name gradscope checks each parameter under, every
    path that reaches the same tensor included (a tied embedding)."""

    def __init__(self, module: torch.nn.Module, paths: Mapping[str, Sequence[str]]) -> None:
        self.module = module
        self.places = {name: [self._slot(p) for p in [name, *others]]
                       for name, others in paths.items()}
        self.own: dict[tuple[int, str], tuple[torch.nn.Module, torch.Tensor]] = {}
        self.now: dict[str, torch.Tensor] = {}  # name → the tensor its slots hold

    def _slot(self, path: str) -> tuple[torch.nn.Module, str]:
        owner, _, leaf = path.rpartition(".")
        return (self.module.get_submodule(owner) if owner else self.module), leaf

    def hold(self, values: Mapping[str, torch.Tensor]) -> None:
        """Put `values` (name → tensor; names not held are left) in their slots."""
        for name, tensor in values.items():
            places = self.places.get(name)
            if places is None or self.now.get(name) is tensor:
                continue
            for sub, leaf in places:
                key = (id(sub), leaf)
                if key not in self.own:
                    self.own[key] = (sub, sub._parameters[leaf])
                sub._parameters[leaf] = tensor
            self.now[name] = tensor

    def lent(self, values: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor | None]:
        """`values` held (as `hold`), and what each of their slots held before, for
        `given_back` once the call turns out to have made no graph."""
        before = {name: self.now.get(name) for name in values if name in self.places}
        self.hold(values)
        return before

    def given_back(self, before: Mapping[str, torch.Tensor | None]) -> None:
        """What `lent` found in the slots put back (the module's own parameter where gradscope
        had put nothing there)."""
        for name, tensor in before.items():
            if tensor is not None:
                self.hold({name: tensor})
            else:
                self._own_again(name)

    def _own_again(self, name: str) -> None:
        for sub, leaf in self.places[name]:
            held = self.own.pop((id(sub), leaf), None)
            if held is not None:
                sub._parameters[leaf] = held[1]
        self.now.pop(name, None)

    def restore(self) -> None:
        """The module's own parameters back in every slot gradscope filled."""
        for (_, leaf), (sub, own) in self.own.items():
            sub._parameters[leaf] = own
        self.own.clear()
        self.now.clear()
