"""Custom ops of the fifth attack: ops that raise, return aliases, mutate undeclared, answer NaN
or depend on the call (benchmarks/attack_modern.py writes this file with `attack_t` spelled
`attack`)."""

import torch


@torch.library.custom_op("attack_t::ok", mutates_args=())
def ok(x: torch.Tensor) -> torch.Tensor:
    return x.sin()

@ok.register_fake
def _(x):
    return torch.empty_like(x)

def _keep(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])

ok.register_autograd(lambda ctx, g: g * ctx.saved_tensors[0].cos(), setup_context=_keep)

@torch.library.custom_op("attack_t::raises", mutates_args=())
def raises(x: torch.Tensor) -> torch.Tensor:
    raise RuntimeError("[bold red]the op refuses[/] \x1b[31m")

@raises.register_fake
def _(x):
    return torch.empty_like(x)

@torch.library.custom_op("attack_t::backward_raises", mutates_args=())
def backward_raises(x: torch.Tensor) -> torch.Tensor:
    return x * 2

@backward_raises.register_fake
def _(x):
    return torch.empty_like(x)

def _raise(ctx, g):
    raise ValueError("<script>backward refuses</script>")

backward_raises.register_autograd(_raise, setup_context=_keep)

@torch.library.custom_op("attack_t::fake_raises", mutates_args=())
def fake_raises(x: torch.Tensor) -> torch.Tensor:
    return x * 3

@fake_raises.register_fake
def _(x):
    raise RuntimeError("the fake kernel refuses")

fake_raises.register_autograd(lambda ctx, g: g * 3, setup_context=_keep)

@torch.library.custom_op("attack_t::alias", mutates_args=())
def alias(x: torch.Tensor) -> torch.Tensor:
    return x  # an alias of its input: torch forbids it

@alias.register_fake
def _(x):
    return torch.empty_like(x)

@torch.library.custom_op("attack_t::view", mutates_args=())
def view(x: torch.Tensor) -> torch.Tensor:
    return x.view(-1)

@view.register_fake
def _(x):
    return torch.empty_like(x).view(-1)

@torch.library.custom_op("attack_t::mutates", mutates_args=())
def mutates(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)  # writes into its input, declaring none
    return x.sin()

@mutates.register_fake
def _(x):
    return torch.empty_like(x)

mutates.register_autograd(lambda ctx, g: g * ctx.saved_tensors[0].cos(), setup_context=_keep)

@torch.library.custom_op("attack_t::nan_backward", mutates_args=())
def nan_backward(x: torch.Tensor) -> torch.Tensor:
    return x * x

@nan_backward.register_fake
def _(x):
    return torch.empty_like(x)

nan_backward.register_autograd(lambda ctx, g: g * float("nan"), setup_context=_keep)

CALLS = [0]

@torch.library.custom_op("attack_t::stateful", mutates_args=())
def stateful(x: torch.Tensor) -> torch.Tensor:
    return x * x

@stateful.register_fake
def _(x):
    return torch.empty_like(x)

def _stateful(ctx, g):
    CALLS[0] += 1
    return g * 2 * ctx.saved_tensors[0] * (1.5 if CALLS[0] % 2 == 0 else 1.0)

stateful.register_autograd(_stateful, setup_context=_keep)

@torch.library.custom_op("attack_t::pair", mutates_args=())
def pair(x: torch.Tensor, k: int, scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    return x * scale, x.roll(k)

@pair.register_fake
def _(x, k, scale=1.0):
    return torch.empty_like(x), torch.empty_like(x)

@torch.library.custom_op("attack_t::indices", mutates_args=())
def indices(x: torch.Tensor) -> torch.Tensor:
    return x.argsort()

@indices.register_fake
def _(x):
    return torch.empty_like(x, dtype=torch.long)

@torch.library.custom_op("attack_t::listed", mutates_args=())
def listed(xs: list[torch.Tensor]) -> torch.Tensor:
    return sum(x.sin() for x in xs)

@listed.register_fake
def _(xs):
    return torch.empty_like(xs[0])

def uses_ok(x):
    return ok(x).sum(-1)

def uses_raises(x):
    return raises(x)

def uses_backward_raises(x):
    return backward_raises(x).sum()

def uses_fake_raises(x):
    return fake_raises(x)

def uses_alias(x):
    return alias(x) * 2

def uses_view(x):
    return view(x) * 2

def uses_mutates(x):
    return mutates(x.clone())

def uses_nan_backward(x):
    return nan_backward(x)

def uses_stateful(x):
    return stateful(x)

def uses_pair(x):
    a, b = pair(x, 1, 2.0)
    return a + b

def uses_indices(x):
    return x[indices(x)]

def uses_listed(x):
    return listed([x, x * 2])
