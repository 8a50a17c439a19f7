"""What distributed code says about its tensors and how a rank reads them: a DTensor's
placements and the part of it this rank holds, Megatron's `tensor_model_parallel`, the
data-parallel wrapper a module is under (DDP, FSDP, FSDP2's `fully_shard`); a DTensor's local
part, its partial gradient reduced as the optimiser would see it, FSDP2's modules resharded,
the wrappers' reduction off while calls are recorded."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from typing import Any

import torch

from gradscope.usercode import user_code


def reduced(grad: torch.Tensor, param: Any) -> torch.Tensor:
    """A DTensor gradient's local part as the optimiser steps with it: a partial sum (a
    Replicate parameter used on each rank's rows: sequence parallelism) reduced to the
    parameter's placements first (every rank does it, in the same order: a collective)."""
    placements = getattr(grad, "placements", None)
    if type(grad).__name__ != "DTensor" or placements is None or not any(
            type(p).__name__ == "Partial" for p in placements):
        return local(grad)
    from torch.distributed.tensor import Partial, Replicate

    wanted = getattr(param, "placements", None) or [
        Replicate() if isinstance(p, Partial) else p for p in placements]
    with user_code("backward"):
        return local(grad.redistribute(grad.device_mesh, wanted))


@contextmanager
def unsynced(module: Any) -> Iterator[None]:
    """A data-parallel wrapper's gradient reduction off while the calls are recorded (DDP's
    `no_sync()`, FSDP2's `set_requires_gradient_sync(False)`): the recording's backward
    reaches the inputs, not the parameters, so a reduction waiting for the parameters'
    gradients would wait across the next call; what a Function receives and returns is the
    same without it (a wrapper reduces its parameters' gradients only)."""
    with ExitStack() as stack:
        for sub in [] if module is None else module.modules():
            names = {c.__name__ for c in type(sub).__mro__}
            if "DistributedDataParallel" in names:
                stack.enter_context(sub.no_sync())
            elif "FSDPModule" in names:
                sub.set_requires_gradient_sync(False, recurse=False)
                stack.callback(sub.set_requires_gradient_sync, True, recurse=False)
        yield


def resharded(module: Any) -> None:
    """FSDP2's modules with their unsharded parameters let go (`reshard()`), so that the next
    forward gathers the values just written into the shards (a root module keeps what it
    gathered after a forward until its backward)."""
    for sub in module.modules():
        if "FSDPModule" in {c.__name__ for c in type(sub).__mro__}:
            with user_code("forward"):
                sub.reshard()


def local(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's local part (a view of its storage); any other tensor itself."""
    to_local = getattr(t, "to_local", None)
    return to_local() if callable(to_local) and type(t).__name__ == "DTensor" else t


def wrapper_of(module: Any) -> str:
    """The data-parallel wrapper the module is or holds (they average gradients over ranks and
    run their collectives in .backward()'s hooks): DDP, FSDP, or fully_shard's FSDPModule."""
    if module is None:
        return ""
    for sub in module.modules():
        names = {c.__name__ for c in type(sub).__mro__}
        for name in ("DistributedDataParallel", "FullyShardedDataParallel"):
            if name in names:
                return name
        if "FSDPModule" in names:
            return "fully_shard (FSDP2)"
    return ""


def parts_held(module: Any, parameters: Mapping[str, torch.Tensor]) -> dict[str, tuple]:
    """Which part of each DTensor parameter this rank holds: its coordinates on the mesh dims
    the tensor is sharded along (ranks that differ only on a replicating dim — the tensor-
    parallel ranks of one data-parallel shard — hold the same part)."""
    if module is None:
        return {}
    named = dict(module.named_parameters(remove_duplicate=False))
    out = {}
    for name in parameters:
        p = named.get(name)
        placements, mesh = getattr(p, "placements", None), getattr(p, "device_mesh", None)
        if placements is None or mesh is None:
            continue
        coordinate = mesh.get_coordinate()
        if coordinate is not None:
            out[name] = tuple(coordinate[i] for i, x in enumerate(placements) if _splits(x))
    return out


def _splits(placement: Any) -> bool:
    """A placement that splits the tensor: Shard, and FSDP2's strided shard on a 2-D mesh
    (neither Replicate nor Partial)."""
    return not placement.is_replicate() and not placement.is_partial()


def said_of(module: Any, parameters: Mapping[str, torch.Tensor]) -> dict[str, str]:
    """What the code says about each parameter: Megatron's `tensor_model_parallel` attribute,
    a DTensor's placements."""
    if module is None:
        return {}
    named = dict(module.named_parameters(remove_duplicate=False))
    said = {}
    for name in parameters:
        p = named.get(name)
        if p is None:
            continue
        if getattr(p, "tensor_model_parallel", False):
            dim = getattr(p, "partition_dim", None)
            said[name] = "sharded: it has tensor_model_parallel = True" + (
                f", partition_dim {dim}" if isinstance(dim, int) else "")
        placements = getattr(p, "placements", None)
        if placements is not None:
            shards = [str(x) for x in placements if _splits(x)]
            said[name] = (f"sharded: DTensor placements {', '.join(shards)}" if shards else
                          "replicated: DTensor placements " +
                          ", ".join(str(x) for x in placements))
    return said
