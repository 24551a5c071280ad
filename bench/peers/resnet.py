"""The ResNet family hora-train implements, written in plain PyTorch.

One builder covers every model the peers and tools/make-golden need:

    stem   "cifar"    3x3 conv stride 1 pad 1, BN, ReLU (no max pool)
           "imagenet" 7x7 conv stride 2 pad 3, BN, ReLU, 3x3 max pool stride 2 pad 1
    block  "basic"      conv3x3(stride) BN ReLU conv3x3 BN (+ shortcut) ReLU
           "bottleneck" v1.5: conv1x1 BN ReLU conv3x3(stride) BN ReLU conv1x1(x4) BN (+ shortcut) ReLU

Stage i has width base_width * 2^i (a bottleneck's output is 4x that), stage 0
has stride 1 and every other stage stride 2 in its first block. The shortcut is
a projection (1x1 conv with the stride, then BN) when the stride is not 1 or the
channel count changes, else the identity. Then global average pooling and a
linear layer with bias. Convolutions have no bias.

Parameter names follow torchvision (conv1, bn1, layerS.B.conv1, ...,
layerS.B.downsample.0/1, fc), and modules are registered in the order
hora-train lays out its parameters: stem conv, stem BN, then per block
conv1, bn1, conv2, bn2[, conv3, bn3], shortcut conv, shortcut BN, and fc.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

STEMS = ("cifar", "imagenet")
BLOCKS = ("basic", "bottleneck")


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, c_in, width, stride):
        super().__init__()
        c_out = width * self.expansion
        self.conv1 = nn.Conv2d(c_in, width, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.downsample = _shortcut(c_in, c_out, stride)

    def last_bn(self):
        return self.bn2

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = x if self.downsample is None else self.downsample(x)
        return F.relu(y + s)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, c_in, width, stride):
        super().__init__()
        c_out = width * self.expansion
        self.conv1 = nn.Conv2d(c_in, width, 1, 1, 0, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)  # v1.5: stride here
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, c_out, 1, 1, 0, bias=False)
        self.bn3 = nn.BatchNorm2d(c_out)
        self.downsample = _shortcut(c_in, c_out, stride)

    def last_bn(self):
        return self.bn3

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        s = x if self.downsample is None else self.downsample(x)
        return F.relu(y + s)


def _shortcut(c_in, c_out, stride):
    if stride == 1 and c_in == c_out:
        return None
    return nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, 0, bias=False), nn.BatchNorm2d(c_out))


class ResNet(nn.Module):
    def __init__(self, stem="cifar", block="basic", blocks=(3, 3, 3), base_width=16,
                 in_channels=3, classes=10):
        super().__init__()
        if stem not in STEMS or block not in BLOCKS:
            raise ValueError(f"stem must be one of {STEMS}, block one of {BLOCKS}")
        self.stem = stem
        if stem == "cifar":
            self.conv1 = nn.Conv2d(in_channels, base_width, 3, 1, 1, bias=False)
        else:
            self.conv1 = nn.Conv2d(in_channels, base_width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(base_width)
        cls = BasicBlock if block == "basic" else Bottleneck
        c = base_width
        self.stage_names = []
        for i, count in enumerate(blocks):
            width = base_width * 2 ** i
            layers = []
            for j in range(count):
                layers.append(cls(c, width, (1 if i == 0 else 2) if j == 0 else 1))
                c = width * cls.expansion
            name = f"layer{i + 1}"
            setattr(self, name, nn.Sequential(*layers))
            self.stage_names.append(name)
        self.fc = nn.Linear(c, classes)

    def residual_blocks(self):
        for name in self.stage_names:
            yield from getattr(self, name)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        if self.stem == "imagenet":
            x = F.max_pool2d(x, 3, 2, 1)
        for name in self.stage_names:
            x = getattr(self, name)(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.fc(x)


def init_kaiming(model, zero_init_last_bn=False):
    """hora-train's initialisation: convs kaiming normal (fan_out, relu), BN
    gamma 1 and beta 0 (the last BN of each block gamma 0 when asked), fc left
    at PyTorch's default."""
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(m, nn.BatchNorm2d):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
    if zero_init_last_bn:
        for b in model.residual_blocks():
            nn.init.zeros_(b.last_bn().weight)


def resnet20(in_channels=1, classes=10):
    return ResNet("cifar", "basic", (3, 3, 3), 16, in_channels, classes)


def resnet50(in_channels=3, classes=1000):
    return ResNet("imagenet", "bottleneck", (3, 4, 6, 3), 64, in_channels, classes)


if __name__ == "__main__":
    for name, m, shape in (("resnet20", resnet20(), (2, 1, 28, 28)), ("resnet50", resnet50(), (1, 3, 224, 224))):
        n = sum(p.numel() for p in m.parameters())
        print(f"{name}: {len(list(m.parameters()))} tensors, {n} parameters, logits {tuple(m(torch.randn(*shape)).shape)}")
