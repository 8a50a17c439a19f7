"""Training-style code over float32 modules, as users write it (the modules are built at import,
seeded, so the values do not depend on the test order)."""

import torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.GELU(), torch.nn.Linear(6, 2))
normed = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.BatchNorm1d(4)).eval()


def loss(x):
    """A global module."""
    return model(x).pow(2).mean()


def make_loss():
    """A closure over a module."""
    inner = torch.nn.Linear(8, 3)

    def closure_loss(x):
        return torch.tanh(inner(x)).sum()

    return closure_loss


closure_loss = make_loss()


def default_loss(x, net=normed):
    """A module as a default argument, with float32 buffers (BatchNorm running stats)."""
    return net(x).sum()


class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 1)

    def score(self, x):
        return self.proj(x).sigmoid().sum()


scorer = Scorer()
bound_score = scorer.score


dropped = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.Dropout(0.5), torch.nn.Linear(6, 2))


def dropout_loss(x):
    return dropped(x).pow(2).sum()


def two_outputs(x):
    y = model(x)
    return y.pow(2).mean(), y.detach()


def as_dict(x):
    return {"loss": model(x).pow(2).mean(), "logits": model(x)}


dead = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
with torch.no_grad():
    dead[0].bias.fill_(-30.0)  # no unit fires for inputs within ±6.4


def dead_loss(x):
    return dead(x).pow(2).sum()


class LogHead(torch.nn.Module):
    """A head that takes the log of a signed activation: NaN wherever it is negative."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 2)

    def forward(self, h):
        return torch.log(self.proj(h))


torch.manual_seed(3)
nan_net = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.Tanh(), LogHead())


def nan_loss(x):
    return nan_net(x).sum()


torch.manual_seed(4)
relu_net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))


def relu_loss(x):
    """An ordinary ReLU layer: about half its elements blocked, every unit alive."""
    return relu_net(x).pow(2).sum()


class Scaled(torch.autograd.Function):
    """A custom Function inside a module: its node is no torch function's result."""

    @staticmethod
    def forward(ctx, x):
        return 2 * x

    @staticmethod
    def backward(ctx, g):
        return 2 * g


class UsesScaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return Scaled.apply(self.lin(x)).sum()


def step(model, batch):
    """A training step over the model it is given."""
    return model(batch).pow(2).mean()


class SmallCNN(torch.nn.Module):
    """Conv, batch norm, relu, max-pool: three of conv2's channels never fire."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.head = torch.nn.Linear(8, 4)
        with torch.no_grad():
            self.conv2.bias[:3] = -50.0

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = torch.relu(self.conv2(h))
        h = torch.nn.functional.max_pool2d(h, 2)
        return self.head(h.mean((2, 3)))


torch.manual_seed(0)
cnn = SmallCNN()


def cnn_loss(x):
    return cnn(x).pow(2).mean()


class RootHead(torch.nn.Module):
    """sqrt of a relu: where the relu is 0, sqrt's derivative is infinite and backward makes
    NaN (inf × 0)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 4)

    def forward(self, x):
        return torch.sqrt(torch.relu(self.lin(x)))


torch.manual_seed(5)
root_net = torch.nn.Sequential(torch.nn.Linear(8, 8), RootHead())


def root_loss(x):
    return root_net(x).sum()
