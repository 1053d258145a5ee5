"""Models for the example training script. Each has one classic mistake."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class SimpleCNN(nn.Module):
    """A CIFAR-10 classifier that forgets to flatten before its first Linear layer."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(32 * 8 * 8, 128)
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = F.relu(self.fc1(x))
        return self.fc2(x)


class MyModel(nn.Module):
    """fc2 expects 30 features, but fc1 produces 20."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 20)
        self.fc2 = nn.Linear(30, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Ensemble(nn.Module):
    """Heads kept in a plain list: the optimizer never sees their parameters."""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = [nn.Linear(dim, 1) for _ in range(heads)]
        self.scales = [nn.Parameter(torch.ones(1)) for _ in range(heads)]

    def forward(self, x):
        noise = torch.randn(x.shape[0], x.shape[1])
        x = x + 0.01 * noise
        outputs = [head(x) * scale for head, scale in zip(self.heads, self.scales, strict=True)]
        return torch.cat(outputs, dim=1)


class DigitClassifier(nn.Module):
    """Ends in softmax: right for predictions, wrong under CrossEntropyLoss (see train.py)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU())
        self.head = nn.Sequential(nn.Linear(128, 10), nn.Softmax(dim=1))

    def forward(self, x):
        return self.head(self.body(x))
