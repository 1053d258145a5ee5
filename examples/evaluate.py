"""Evaluation and housekeeping code with the mistakes of the wider catalogue."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

torch.autograd.set_detect_anomaly(True)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Dropout(0.5))
        self.head = nn.Linear(256, 10)

    def forward(self, x):
        return self.head(checkpoint(self.body, x))


def load(path):
    model = Classifier().to(device)
    model.load_state_dict(torch.load(path))
    model.head.weight.require_grad = False
    return model


def log_probs(logits):
    return torch.log(F.softmax(logits, dim=1))


def hand_made_loss(logits, target):
    return -(target * torch.log(F.softmax(logits, dim=1))).sum(dim=1).mean()


def detector_loss(scores, labels):
    return nn.BCELoss()(torch.sigmoid(scores), labels)


def fit(model, loader, optimizer, epochs):
    criterion = nn.CrossEntropyLoss()
    for _ in range(epochs):
        running = 0.0
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            optimizer.step()
            loss.backward()
            running += loss
        print(running)


def fit_scheduled(model, loader, optimizer, scheduler):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        scheduler.step()
        optimizer.step()


def validate(val_loader):
    model = Classifier().to(device)
    correct = 0
    with torch.no_grad():
        for x, y in val_loader:
            x, y = x.to(device), y.to(device)
            correct += (model(x).argmax(1) == y).sum().item()
    return correct


def predict(model, test_loader):
    model.eval()
    predictions = []
    for x, _ in test_loader:
        predictions.append(model.forward(x.to(device)))
    return predictions


def amp_step(model, x):
    with torch.cuda.amp.autocast():
        return model(x)
