"""The papers' models: logistic (softmax) regression, an MLP and the MNIST CNN.

Every model maps a batch of inputs to class logits of shape (n, n_classes) and is
trained with the mean cross-entropy. An L2 penalty, where a paper uses one, is a
property of the model (``model.l2``) and enters the objective as
``(l2 / 2) * ||weights||^2``; it does not depend on the data, so private trainers add
its gradient after clipping and noise, at no privacy cost.
"""

from __future__ import annotations

import os
from typing import Sequence

import torch
from torch import nn

from dpfair_analysis.catalog import MODEL_NAMES
from dpfair_analysis.validation import check_choice, check_int_at_least, check_nonnegative, check_positive_int

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "elu": nn.ELU}


class LogisticRegression(nn.Module):
    """Logistic regression; multinomial (softmax) regression for more than two classes.

    Binary: one linear score z = w^T x + b, returned as the logit pair (0, z), so
    softmax cross-entropy on the pair is exactly the logistic loss
    log(1 + exp(-(2y - 1) z)) and the parameters (and their per-sample gradients,
    hence clipping) are those of the papers' single-output logistic regression.
    K > 2 classes: logits = x W^T + b with W of shape (K, d).
    """

    def __init__(self, n_features: int, n_classes: int = 2, *, l2: float = 0.0) -> None:
        super().__init__()
        n_classes = _check_classes(n_classes)
        self.binary = n_classes == 2
        self.linear = nn.Linear(check_positive_int(n_features, "n_features"), 1 if self.binary else n_classes)
        self.l2 = check_nonnegative(l2, "l2")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.linear(x.flatten(1))
        if self.binary:
            return torch.cat([torch.zeros_like(scores), scores], dim=1)
        return scores


class MLP(nn.Module):
    """Fully connected network: d -> hidden[0] -> ... -> hidden[-1] -> n_classes."""

    def __init__(self, n_features: int, n_classes: int = 2, *, hidden: Sequence[int] = (64, 64),
                 activation: str = "relu", l2: float = 0.0) -> None:
        super().__init__()
        check_choice(activation, "activation", ACTIVATIONS)
        sizes = [check_positive_int(n_features, "n_features")]
        sizes += [check_positive_int(h, "hidden size") for h in hidden]
        layers: list[nn.Module] = []
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            layers += [nn.Linear(fan_in, fan_out), ACTIVATIONS[activation]()]
        layers.append(nn.Linear(sizes[-1], _check_classes(n_classes)))
        self.net = nn.Sequential(*layers)
        self.l2 = check_nonnegative(l2, "l2")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.flatten(1))


class MnistCNN(nn.Module):
    """The DPSGD-F paper's MNIST network (2 conv + 2 linear, 431,080 parameters).

    conv(1, 20, 5) - ReLU - maxpool 2 - conv(20, 50, 5) - ReLU - maxpool 2 -
    fc(800, 500) - ReLU - fc(500, 10), for 1 x 28 x 28 inputs.
    """

    def __init__(self, n_classes: int = 10, *, l2: float = 0.0) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(800, 500), nn.ReLU(),
                                        nn.Linear(500, _check_classes(n_classes)))
        self.l2 = check_nonnegative(l2, "l2")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim == 2:
            x = x.view(-1, 1, 28, 28)
        return self.classifier(self.features(x))


MODELS = MODEL_NAMES


def build_model(name: str, *, input_shape: Sequence[int], n_classes: int, seed: int = 0,
                hidden: Sequence[int] = (64, 64), activation: str = "relu", l2: float = 0.0) -> nn.Module:
    """A model by name, initialised from ``seed`` (same seed, same weights).

    ``input_shape`` is the shape of one sample (``X.shape[1:]``).
    """
    check_choice(name, "model", MODELS)
    n_features = 1
    for size in input_shape:
        n_features *= int(size)
    # nn.Module initialisers draw from the global generator: fork it so the caller's
    # random state is left exactly as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if name == "logreg":
            model: nn.Module = LogisticRegression(n_features, n_classes, l2=l2)
        elif name == "mlp":
            model = MLP(n_features, n_classes, hidden=hidden, activation=activation, l2=l2)
        else:
            if tuple(input_shape) not in {(1, 28, 28), (784,)}:
                raise ValueError(f"model 'cnn' needs 1x28x28 (or 784) inputs, got input_shape={tuple(input_shape)}")
            model = MnistCNN(n_classes, l2=l2)
    return model


def load_weights(model: nn.Module, path: str | os.PathLike) -> nn.Module:
    """Load a state dict saved with ``torch.save(model.state_dict(), path)`` into ``model`` (in place).

    The file is read with ``torch.load(..., weights_only=True)``: tensors and plain containers only, so
    nothing in it can run code. Every parameter and buffer of ``model`` must be in it with its shape
    (``ValueError`` naming the first missing, unexpected or mis-shaped entry otherwise).

    Parameters
    ----------
    model : torch.nn.Module
        The architecture the weights belong to.
    path : path
        The saved state dict.
    """
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 -- whatever the file is, it is not a loadable state dict
        raise ValueError(f"{str(path)!r} is not a state dict that loads without running code "
                         f"(torch.load(weights_only=True): {' '.join(str(error).split())[:300]})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{str(path)!r} holds a {type(state).__name__}, not a state dict of tensors (save one with "
                         "torch.save(model.state_dict(), path))")
    expected = model.state_dict()
    missing = [k for k in expected if k not in state]
    unexpected = [k for k in state if k not in expected]
    if missing or unexpected:
        raise ValueError(f"{str(path)!r} does not fit the model: missing {missing[:5]}, unexpected {unexpected[:5]}")
    for key, tensor in expected.items():
        if tuple(state[key].shape) != tuple(tensor.shape):
            raise ValueError(f"{str(path)!r} does not fit the model: {key} has shape {tuple(state[key].shape)}, "
                             f"the model's is {tuple(tensor.shape)}")
    model.load_state_dict(state)
    return model


def check_model_fits(model: nn.Module, X: torch.Tensor, *, n_classes: int) -> None:
    """``ValueError`` unless ``model`` maps inputs like ``X`` (a few rows) to logits of shape
    ``(len(X), n_classes)``: the check a model from a file gets before any training.

    Parameters
    ----------
    model : torch.nn.Module
        The model to check.
    X : torch.Tensor
        A few rows of the data it will see.
    n_classes : int
        Number of label classes of that data.
    """
    shape = tuple(X.shape[1:])
    try:
        with torch.no_grad():
            out = model(X)
    except Exception as error:  # noqa: BLE001 -- any failure is a mismatch with the data
        raise ValueError(f"the model does not take this data's inputs (one row has shape {shape}): "
                         f"{' '.join(str(error).split())[:200]}") from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (len(X), n_classes):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"the model gives outputs of shape {got} for {len(X)} rows, but the label has {n_classes} "
                         f"classes: it must give one logit per class, shape ({len(X)}, {n_classes})")


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def l2_penalty(model: nn.Module) -> torch.Tensor:
    """(l2 / 2) * sum of squared weights (biases excluded), the model's data-free penalty."""
    l2 = getattr(model, "l2", 0.0)
    weights = [p for name, p in model.named_parameters() if not name.endswith("bias")]
    return 0.5 * l2 * sum((w ** 2).sum() for w in weights)


def _check_classes(n_classes: int) -> int:
    return check_int_at_least(n_classes, "n_classes", 2)
