"""A small fair-DP release to test: the demographic-parity gap of a model's predictions, privately.

A fair training loop (PF-LD, paper 003; the fairness lens, paper 001) watches the gap between
two groups' positive-prediction rates. Its privacy is stated for one person's sensitive
attribute changing -- the kit's ``attribute-change`` relation. Data is a dict of equal-length
arrays: ``group`` (0 or 1, the sensitive attribute) and ``y`` (the model's prediction, 0 or 1).

* :func:`private_gap_wrong` adds Laplace noise of scale Delta / epsilon with the plausible
  claim Delta = 1 / (smallest group size): "one person moves, so a group's rate moves by at
  most one over its size". It is wrong twice: the person leaves one group and joins the other,
  so both rates move, and the group sizes -- hence the noise scale -- are themselves private.
* :func:`private_gap_fixed` releases the four counts (positives and members of each group)
  with Laplace noise of scale 4 / epsilon: moving one person changes each of the four by at
  most 1 (l1 sensitivity 4), and the gap is computed from the noisy counts (post-processing).

Run ``pytest examples/`` or the tutorial (``examples/fair_gap_tutorial.py``); audit from the
command line with ``dpfair audit --target examples/fair_gap.py:private_gap_wrong --epsilon 1
--relation attribute-change --data examples/fair_gap_data.csv --json``.
"""

import numpy as np

EPSILON = 1.0

#: Eight people: six in group 0, two in group 1, and the model's predictions.
DATA = {"group": np.array([0, 0, 0, 0, 0, 0, 1, 1]), "y": np.array([1, 0, 1, 1, 0, 1, 1, 0])}


def rates(data):
    """Each group's positive-prediction rate (0 for an empty group)."""
    group, y = np.asarray(data["group"]), np.asarray(data["y"])
    return np.array([y[group == g].mean() if np.any(group == g) else 0.0 for g in (0, 1)])


def gap(data):
    """The demographic-parity gap: rate of group 0 minus rate of group 1."""
    r = rates(data)
    return r[0] - r[1]


def claimed_sensitivity(data, neighbour=None):
    """The plausible (wrong) claim: 1 / the smallest group's size (no claim for an empty group)."""
    sizes = np.bincount(np.asarray(data["group"]), minlength=2)
    return 1.0 / sizes.min() if sizes.min() > 0 else None


def private_gap_wrong(data, rng):
    """The gap plus Laplace(claimed_sensitivity / epsilon): NOT epsilon-DP under attribute-change."""
    scale = (claimed_sensitivity(data) or 1.0) / EPSILON
    return gap(data) + rng.laplace(scale=scale)


def counts(data):
    """Positives and members of group 0, then of group 1."""
    group, y = np.asarray(data["group"]), np.asarray(data["y"])
    return np.array([y[group == 0].sum(), np.sum(group == 0), y[group == 1].sum(), np.sum(group == 1)], dtype=float)


def private_gap_fixed(data, rng, noise_scale=1.0):
    """The four counts plus Laplace(4 / epsilon) each (l1 sensitivity 4): epsilon-DP; the gap is computed from
    them. ``noise_scale`` < 1 gives the under-noised twin the kit uses to check an audit's power."""
    return counts(data) + rng.laplace(scale=noise_scale * 4.0 / EPSILON, size=4)


def gap_from_counts(noisy):
    """The gap from released (noisy) counts: post-processing, no further privacy cost."""
    positives0, members0, positives1, members1 = noisy
    return positives0 / max(members0, 1.0) - positives1 / max(members1, 1.0)
