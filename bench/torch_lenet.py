"""The LeNet of models/archs.c in PyTorch (132,220 parameters), shared by the
benchmarks' references (lenet_step.py, parle_job.py)."""
from torch import nn


def lenet(dropout=0.25, classes=10):
    return nn.Sequential(
        nn.Conv2d(1, 20, 5), nn.BatchNorm2d(20), nn.ReLU(), nn.MaxPool2d(3), nn.Dropout(dropout),
        nn.Conv2d(20, 50, 5), nn.BatchNorm2d(50), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(dropout),
        nn.Flatten(),
        nn.Linear(200, 500), nn.BatchNorm1d(500), nn.ReLU(), nn.Dropout(dropout),
        nn.Linear(500, classes),
    )


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())


if __name__ == "__main__":
    print(count_parameters(lenet()))
