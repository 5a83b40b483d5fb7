"""The synthetic generator controls group size, input norm and distance to the boundary."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dpfair_analysis.data import synthetic_groups
from dpfair_analysis.data.synthetic import boundary_distance


@pytest.mark.parametrize("n_classes", [2, 3, 5])
def test_sizes_norms_and_margins(n_classes):
    sizes, scales, margins = (3000, 800, 400), (1.0, 2.0, 4.0), (0.3, 0.05, 0.6)
    ds = synthetic_groups(sizes=sizes, dim=12, input_scale=scales, margin=margins, n_classes=n_classes,
                          seed=7)
    assert ds.group_sizes().tolist() == list(sizes) and ds.n_classes == n_classes
    norms = ds.X.double().norm(dim=1)
    mean_norm = [float(norms[ds.group == g].mean()) for g in range(3)]
    # E||x|| = input_scale exactly; the sample means are within 2% here
    np.testing.assert_allclose(np.array(mean_norm) / mean_norm[0], np.array(scales) / scales[0], rtol=0.02)
    dist = boundary_distance(ds.X, ds.info["directions"])
    mean_dist = [float(dist[(ds.group == g).numpy()].mean()) for g in range(3)]
    assert np.argsort(mean_dist).tolist() == np.argsort(margins).tolist()
    np.testing.assert_allclose(mean_dist, margins, rtol=0.03)


def test_noiseless_labels_are_the_true_model():
    ds = synthetic_groups(sizes=(200, 100), dim=5, n_classes=3, temperature=0.0, seed=1)
    logits = ds.X.double().numpy() @ ds.info["directions"].T
    assert (logits.argmax(1) == ds.y.numpy()).all()


def test_logistic_labels_follow_sigmoid():
    ds = synthetic_groups(sizes=(20000,), dim=4, input_scale=(2.0,), margin=(0.5,), temperature=0.5, seed=2)
    w = ds.info["directions"][1] - ds.info["directions"][0]  # = 2 w for K = 2
    p = 1 / (1 + np.exp(-(ds.X.double().numpy() @ w / 2) / 0.5))
    assert abs(float(ds.y.double().mean()) - p.mean()) < 0.01
    # labels agree with the more likely class about as often as the model says
    agree = ((p > 0.5) == (ds.y.numpy() == 1)).mean()
    assert abs(agree - np.maximum(p, 1 - p).mean()) < 0.01


def test_same_seed_same_data_other_seed_other_data():
    a = synthetic_groups(sizes=(50, 20), dim=3, seed=4)
    b = synthetic_groups(sizes=(50, 20), dim=3, seed=4)
    c = synthetic_groups(sizes=(50, 20), dim=3, seed=5)
    assert torch.equal(a.X, b.X) and torch.equal(a.y, b.y)
    assert not torch.equal(a.X, c.X)


def test_bad_arguments():
    with pytest.raises(ValueError, match="margin"):
        synthetic_groups(sizes=(10,), dim=3, input_scale=(1.0,), margin=(0.6,))
    with pytest.raises(ValueError, match="one value per group"):
        synthetic_groups(sizes=(10, 10), dim=3, input_scale=(1.0,))
    with pytest.raises(ValueError, match="sizes"):
        synthetic_groups(sizes=(10, 0), dim=3)
    with pytest.raises(ValueError, match="dim"):
        synthetic_groups(sizes=(10,), dim=2, n_classes=3)
    with pytest.raises(ValueError, match="input_scale"):
        synthetic_groups(sizes=(10,), dim=3, input_scale=(-1.0,))
    with pytest.raises(ValueError, match="seed"):
        synthetic_groups(sizes=(10,), dim=3, seed=-1)
