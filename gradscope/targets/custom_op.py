"""A custom op as a target: an op made by `torch.library.custom_op`, `torch.ops.NS.OP` (its
default overload) or one of its overloads — bound in FILE.py, reached as
`FILE.py:torch.ops.NS.OP`, or spelled `NS::OP` for an op some imported module registered
(`--import FILE.py`). Its schema names the inputs and their kinds: a Tensor argument is an
input, a number or flag takes `--arg` (its default kept where the schema has one), an optional
Tensor stays None unless given a value; a list of tensors is refused with what to do instead.

The op is called as itself, one call per evaluation — never through torch.func: a
`register_autograd` backward still raises under func.grad/jacrev on torch 2.13 — and the
backward it registered is what its table checks (the in-place check names it as the culprit
with the registered function's line)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import torch

from gradscope.errors import UsageError
from gradscope.targets.code import CodeTarget
from gradscope.targets.signature import Param
from gradscope.tensors import grad_nodes

# where torch defines the Functions it generates for register_autograd ops
CUSTOM_OPS = "torch._library.autograd"
OP_SPELLING = re.compile(r"^([A-Za-z_]\w*)::([A-Za-z_]\w*)(?:\.([A-Za-z_]\w*))?$")
SCALARS = {"FloatType": "float", "IntType": "int", "SymIntType": "int", "BoolType": "bool",
           "StringType": "str"}


class CustomOpTarget(CodeTarget):
    """The op, called with its schema's arguments in order, one call per evaluation."""

    _unbatched = True

    def op_call(self, values: Mapping[str, torch.Tensor]) -> tuple[Any, tuple, dict] | None:
        args, kwargs = self._call_args({**values, **self.constants})
        return self.obj, tuple(args), kwargs


def in_graph(output: torch.Tensor) -> bool:
    """Whether a custom op's registered backward is in `output`'s graph."""
    return any(getattr(getattr(node, "_forward_cls", None), "__module__", "") == CUSTOM_OPS
               for node in grad_nodes(output.grad_fn))


def overload(obj: Any) -> Any:
    """The op overload `obj` is or stands for (a packet: its default), else None."""
    ops = torch._ops  # (the types of torch.ops' objects; no public alias on 2.13)
    if isinstance(obj, ops.OpOverload):
        return obj
    if isinstance(obj, ops.OpOverloadPacket):
        return getattr(obj, "default", None)
    inner = getattr(obj, "_opoverload", None)  # torch.library.CustomOpDef
    return inner if isinstance(inner, ops.OpOverload) else None


def spelled(text: str) -> Any:
    """`NS::OP` or `NS::OP.OVERLOAD` as the registered op (UsageError where none is)."""
    found = OP_SPELLING.match(text.strip())
    if found is None:
        return None
    namespace, name, which = found.groups()
    try:
        packet = getattr(getattr(torch.ops, namespace), name)
        return getattr(packet, which) if which else packet
    except (AttributeError, RuntimeError):
        raise UsageError(f"no op {text} is registered: import the module that registers it "
                         "with --import FILE.py (or name the op as FILE.py:NAME)") from None


def build(obj: Any, text: str, args: Mapping[str, Any], init: Mapping[str, Any]
          ) -> CustomOpTarget | None:
    op = overload(obj)
    if op is None:
        return None
    if init:
        raise UsageError(f"{text} is a custom op; --init is for nn.Module classes")
    return CustomOpTarget(text, "function", op, _params(op, text), args)


def _params(op: Any, text: str) -> list[Param]:
    params = []
    for arg in op._schema.arguments:  # (the op's schema: its documented FunctionSchema)
        kind, optional = _kind(arg.type)
        default = arg.default_value if arg.has_default_value() else \
            (None if optional else Param.__dataclass_fields__["default"].default)
        if kind == "TensorType":
            params.append(Param(arg.name, default, keyword=arg.kwarg_only))
        elif kind in SCALARS:
            params.append(Param(arg.name, default, SCALARS[kind], arg.kwarg_only))
        elif kind == "ListType" and _kind(arg.type.getElementType())[0] == "TensorType":
            raise UsageError(f"{text}: argument `{arg.name}` is a list of tensors; wrap the op "
                             "in a def that takes the tensors one by one and builds the list")
        elif kind == "ListType":  # (int[] dims, float[] weights: --arg dims=[0,1])
            params.append(Param(arg.name, default, "list", arg.kwarg_only))
        else:
            params.append(Param(arg.name, default, str(arg.type), arg.kwarg_only))
    return params


def _kind(kind: Any) -> tuple[str, bool]:
    """A schema type's kind ("TensorType", "FloatType", …) and whether it was optional."""
    if kind.kind() == "OptionalType":
        return kind.getElementType().kind(), True
    return kind.kind(), False
