"""The CIFAR networks of models/archs.c in PyTorch, for the benchmarks'
references: All-CNN (1,667,166 parameters at 10 classes) and WRN-d-k
(WRN-16-4: 2,748,890), layer for layer as ours."""
from torch import nn

ALLCNN_PARAMS = 1667166
WRN_16_4_PARAMS = 2748890


def conv_bn_relu(in_c, out_c, k, stride, pad):
    return [nn.Conv2d(in_c, out_c, k, stride, pad), nn.BatchNorm2d(out_c), nn.ReLU()]


def allcnn(dropout=0.5, classes=10):
    """Dropout .2 on the input, three blocks of conv-BN-ReLU (96, 96, 96/2;
    192, 192, 192/2; 192, 192, 1x1 to the classes) with dropout between them,
    then an 8x8 average pool."""
    return nn.Sequential(
        nn.Dropout(0.2),
        *conv_bn_relu(3, 96, 3, 1, 1), *conv_bn_relu(96, 96, 3, 1, 1),
        *conv_bn_relu(96, 96, 3, 2, 1), nn.Dropout(dropout),
        *conv_bn_relu(96, 192, 3, 1, 1), *conv_bn_relu(192, 192, 3, 1, 1),
        *conv_bn_relu(192, 192, 3, 2, 1), nn.Dropout(dropout),
        *conv_bn_relu(192, 192, 3, 1, 1), *conv_bn_relu(192, 192, 3, 1, 1),
        *conv_bn_relu(192, classes, 1, 1, 0),
        nn.AvgPool2d(8), nn.Flatten(),
    )


class WideBlock(nn.Module):
    """Pre-activation basic block: BN-ReLU-conv3x3-BN-ReLU-dropout-conv3x3, plus
    the input, or a 1x1 conv of its activation when the shape changes."""

    def __init__(self, in_c, out_c, stride, dropout):
        super().__init__()
        self.bn1, self.bn2 = nn.BatchNorm2d(in_c), nn.BatchNorm2d(out_c)
        self.conv1 = nn.Conv2d(in_c, out_c, 3, stride, 1, bias=False)
        self.conv2 = nn.Conv2d(out_c, out_c, 3, 1, 1, bias=False)
        self.drop = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        self.shortcut = (None if in_c == out_c and stride == 1
                         else nn.Conv2d(in_c, out_c, 1, stride, 0, bias=False))

    def forward(self, x):
        act = self.bn1(x).relu()
        y = self.conv2(self.drop(self.bn2(self.conv1(act)).relu()))
        return y + (x if self.shortcut is None else self.shortcut(act))


def wrn(depth=16, width=4, dropout=0.0, classes=10):
    blocks, widths = (depth - 4) // 6, [16, 16 * width, 32 * width, 64 * width]
    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False)]
    for g in range(3):
        for i in range(blocks):
            layers.append(WideBlock(widths[g] if i == 0 else widths[g + 1], widths[g + 1],
                                    2 if i == 0 and g > 0 else 1, dropout))
    layers += [nn.BatchNorm2d(widths[3]), nn.ReLU(), nn.AvgPool2d(8), nn.Flatten(),
               nn.Linear(widths[3], classes)]
    return nn.Sequential(*layers)


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())


def check_parameter_counts():
    """Ours and these must be the same networks: same parameter counts."""
    for name, model, want in (("allcnn", allcnn(), ALLCNN_PARAMS),
                              ("wrn-16-4", wrn(16, 4), WRN_16_4_PARAMS)):
        got = count_parameters(model)
        assert got == want, f"{name}: {got} parameters, ours has {want}"


if __name__ == "__main__":
    check_parameter_counts()
    print(count_parameters(allcnn()), count_parameters(wrn(16, 4)))
