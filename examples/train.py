"""A small training script that makes the mistakes torchlint exists for."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from models import DigitClassifier, SimpleCNN
from torch.utils.data import DataLoader

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
classifier = nn.Sequential(nn.Flatten(), nn.Linear(784, 10), nn.Softmax(dim=1))


def train(dataset, epochs=10):
    model = SimpleCNN().to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(dataset, batch_size=64, shuffle=True)
    for _ in range(epochs):
        for images, labels in loader:
            logits = model(images)
            probs = F.softmax(logits, dim=1)
            loss = criterion(probs, labels)
            loss.backward()
            optimizer.step()


def train_classifier(loader):
    optimizer = torch.optim.Adam(classifier.parameters())
    nll = nn.NLLLoss()
    for x, y in loader:
        optimizer.zero_grad()
        out = classifier(x)
        loss = nll(out, y)
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()


def calibrate(logits, targets):
    temperature = torch.ones(1, requires_grad=True)
    temperature += 0.1
    scores = torch.sigmoid(logits / temperature)
    return F.binary_cross_entropy_with_logits(scores, targets)


def train_digits(loader):
    model = DigitClassifier()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters())
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
