"""Convolutional models the way public code writes them, small (10k–30k parameters), random
weights: a ResNet of torchvision-style BasicBlocks (batch norm, ReLU, a strided shortcut), a
U-Net (double convs, max pooling, transposed convs, concatenated skips) and a convolutional VAE
(the reparameterisation's noise is an input, as a check needs it fixed). Each has a correct loss
and one with a planted bug of the kind users write:

* ResNet: a custom ReLU whose backward clamps the gradient instead of masking it;
* U-Net: a skip connection detached (`.detach()` left in after debugging);
* VAE: a custom reparameterisation whose backward forgets the ½ in ∂σ/∂logvar.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


class ClampedReLU(torch.autograd.Function):
    """ReLU by hand with a wrong backward: `grad.clamp(min=0)` where `grad * (x > 0)` belonged."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        return grad.clamp(min=0)


class BasicBlock(nn.Module):
    """torchvision's BasicBlock: conv-bn-relu-conv-bn plus the (projected) shortcut, relu."""

    def __init__(self, cin: int, cout: int, stride: int = 1, relu=F.relu) -> None:
        super().__init__()
        self.relu = relu
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, relu=F.relu, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = BasicBlock(8, 8, relu=relu)
        self.layer2 = BasicBlock(8, 16, 2, relu=relu)
        self.layer3 = BasicBlock(16, 24, 2, relu=relu)
        self.fc = nn.Linear(24, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class DoubleConv(nn.Sequential):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(2, cout), nn.SiLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(2, cout), nn.SiLU())


class UNet(nn.Module):
    """Two levels down, two up; `detach_skip` plants the bug in the upper skip connection."""

    def __init__(self, detach_skip: bool = False) -> None:
        super().__init__()
        self.detach_skip = detach_skip
        self.inc = DoubleConv(1, 8)
        self.down1 = DoubleConv(8, 12)
        self.down2 = DoubleConv(12, 16)
        self.up1 = nn.ConvTranspose2d(16, 12, 2, stride=2)
        self.conv1 = DoubleConv(24, 12)
        self.up2 = nn.ConvTranspose2d(12, 8, 2, stride=2)
        self.conv2 = DoubleConv(16, 8)
        self.outc = nn.Conv2d(8, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x1 = self.inc(x)
        x2 = self.down1(F.max_pool2d(x1, 2))
        x3 = self.down2(F.max_pool2d(x2, 2))
        y = self.conv1(torch.cat([x2, self.up1(x3)], dim=1))
        skip = x1.detach() if self.detach_skip else x1
        return self.outc(self.conv2(torch.cat([skip, self.up2(y)], dim=1)))


class Reparameterise(torch.autograd.Function):
    """z = μ + exp(½·logvar)·ε with a hand-written backward."""

    @staticmethod
    def forward(ctx, mu, logvar, eps):
        std = torch.exp(0.5 * logvar)
        ctx.save_for_backward(std, eps)
        return mu + std * eps

    @staticmethod
    def backward(ctx, grad):
        std, eps = ctx.saved_tensors
        return grad, grad * eps * std * 0.5, None


class WrongReparameterise(Reparameterise):
    """The same with the ½ of ∂exp(½·logvar)/∂logvar forgotten."""

    @staticmethod
    def backward(ctx, grad):
        std, eps = ctx.saved_tensors
        return grad, grad * eps * std, None


class VAE(nn.Module):
    def __init__(self, reparameterise=Reparameterise, latent: int = 8) -> None:
        super().__init__()
        self.reparameterise = reparameterise
        self.enc = nn.Sequential(nn.Conv2d(1, 8, 4, 2, 1), nn.LeakyReLU(0.2),
                                 nn.Conv2d(8, 16, 4, 2, 1), nn.LeakyReLU(0.2), nn.Flatten())
        self.mu = nn.Linear(16 * 4 * 4, latent)
        self.logvar = nn.Linear(16 * 4 * 4, latent)
        self.dec_in = nn.Linear(latent, 16 * 4 * 4)
        self.dec = nn.Sequential(nn.ConvTranspose2d(16, 8, 4, 2, 1), nn.LeakyReLU(0.2),
                                 nn.ConvTranspose2d(8, 1, 4, 2, 1))

    def forward(self, x: torch.Tensor, eps: torch.Tensor):
        h = self.enc(x)
        mu, logvar = self.mu(h), self.logvar(h)
        z = self.reparameterise.apply(mu, logvar, eps)
        return self.dec(self.dec_in(z).view(-1, 16, 4, 4)), mu, logvar


def vae_objective(model: VAE, x: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    recon, mu, logvar = model(x, eps)
    kl = -0.5 * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())
    return F.mse_loss(recon, x) + kl


def twins(right: Callable[[], nn.Module], bad: Callable[[], nn.Module]
           ) -> tuple[nn.Module, nn.Module]:
    """A correct model and its buggy twin, built from the same seed: the same weights."""
    torch.manual_seed(0)
    first = right()
    torch.manual_seed(0)
    return first, bad()


resnet, resnet_bad = twins(ResNet, lambda: ResNet(relu=ClampedReLU.apply))
unet, unet_bad = twins(UNet, lambda: UNet(detach_skip=True))
vae, vae_bad = twins(VAE, lambda: VAE(WrongReparameterise))


def resnet_loss(x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """x: images (N, 3, 16, 16); labels: ints in [0, 10) (`--const`)."""
    return F.cross_entropy(resnet(x), labels)


def resnet_bad_loss(x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(resnet_bad(x), labels)


def unet_loss(x: torch.Tensor) -> torch.Tensor:
    """x: (N, 1, 16, 16)."""
    return unet(x).pow(2).mean()


def unet_bad_loss(x: torch.Tensor) -> torch.Tensor:
    return unet_bad(x).pow(2).mean()


def vae_loss(x: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    """x: (N, 1, 16, 16); eps: (N, 8), the reparameterisation's noise held fixed (`--const`)."""
    return vae_objective(vae, x, eps)


def vae_bad_loss(x: torch.Tensor, eps: torch.Tensor) -> torch.Tensor:
    return vae_objective(vae_bad, x, eps)
