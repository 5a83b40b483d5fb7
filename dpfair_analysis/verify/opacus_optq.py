"""Opt-Q against Opacus, its reference implementation: the toolkit's :class:`~dpfair_analysis.training.optq.OptQ`
and Opacus's ``AdaClipDPOptimizer`` run step by step on the same batches with the same standard-normal draws
(:func:`optq_vs_opacus`), and what Opacus's AdaClip releases against what it accounts
(:func:`opacus_count_accounting`).

A cross-check, not a training path: to feed both the same draws it replaces Opacus's noise function for the
duration of one step (``unittest.mock.patch``), which is why it lives in ``verify/`` beside the audits and not
in the library's training or experiment code. It needs the ``opacus`` extra.
"""

from __future__ import annotations

import copy
import warnings
from typing import Sequence
from unittest import mock

import pandas as pd
import torch
import torch.nn.functional as F

from dpfair_analysis import data as datasets
from dpfair_analysis.gradients import MaterialisedGradients, parameters_of, per_sample_gradients
from dpfair_analysis.models import build_model
from dpfair_analysis.privacy.accounting import epsilon_from_event, poisson_gaussian_event
from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier
from dpfair_analysis.training.loop import apply_update, release_step
from dpfair_analysis.training.optq import OptQ, optq_gradient_multiplier
from dpfair_analysis.validation import check_choice


def optq_vs_opacus(*, steps: int = 60, sampling: str = "shuffle", seed: int = 0, rows: int = 512,
                   batch_size: int = 32, lr: float = 0.5, clip: float = 0.3, noise_multiplier: float = 1.0,
                   count_noise: float | None = None, target_quantile: float = 0.5,
                   clip_lr: float = 0.2, clamp_fraction: bool = False) -> pd.DataFrame:
    """Opt-Q (:class:`~dpfair_analysis.training.optq.OptQ` through the loop's ``release_step``) against
    Opacus's ``AdaClipDPOptimizer`` step by step, on the same batches of Adult with logistic regression,
    with the *same standard-normal draws* fed to both (Opacus's noise generator is replaced by the draws
    our release made). One row per step: both bounds before and after, both noisy unclipped fractions,
    the largest parameter difference.

    ``sampling="shuffle"`` (fixed-size batches, |S| = b) with ``clamp_fraction=False`` (Opacus does not
    clamp the noisy fraction to [0, 1]; our default does, as TF Privacy): the two must agree to float
    precision. With the clamp they part at the first step whose noisy fraction leaves [0, 1].
    ``"poisson"``: Opacus divides the noisy count by the batch's actual size |S| and we (Andrew et al.,
    TF Privacy) by the expected b; to compare the rules on the same counts, Opacus's bound and parameters
    are reset to ours before every step (``fraction_opacus_same_counts``).
    Differences by construction: Opacus counts a sample as unclipped when C / (||g|| + 1e-6) >= 1 and
    clips by C / (||g|| + 1e-6); it adds the count noise to the uncentred count; it does not clamp the
    fraction to [0, 1]; it clamps C to [min_clipbound, max_clipbound] (set wide here).
    """
    from opacus import GradSampleModule
    from opacus.optimizers import AdaClipDPOptimizer
    from opacus.optimizers import adaclipoptimizer as adaclip

    check_choice(sampling, "sampling", ("shuffle", "poisson"))
    count_noise = count_noise if count_noise is not None else batch_size / 20
    data = datasets.load("adult").subset(torch.arange(rows))
    ours = build_model("logreg", input_shape=tuple(data.X.shape[1:]), n_classes=2, seed=seed)
    theirs = copy.deepcopy(ours)
    module = GradSampleModule(theirs, loss_reduction="mean")
    optimizer = AdaClipDPOptimizer(torch.optim.SGD(module.parameters(), lr=lr), noise_multiplier=noise_multiplier,
                                   target_unclipped_quantile=target_quantile, clipbound_learning_rate=clip_lr,
                                   max_clipbound=1e6, min_clipbound=1e-6, unclipped_num_std=count_noise,
                                   max_grad_norm=clip, expected_batch_size=batch_size, loss_reduction="mean")
    policy = OptQ(clip, noise_multiplier, count_noise, target_quantile=target_quantile, clip_lr=clip_lr,
                  clamp_fraction=clamp_fraction)
    generator = torch.Generator().manual_seed(seed)
    sampler = torch.Generator().manual_seed(seed + 1)
    params = parameters_of(ours)
    records = []
    for step in range(1, steps + 1):
        if sampling == "shuffle":
            index = torch.randperm(rows, generator=sampler)[:batch_size]
        else:
            index = (torch.rand(rows, generator=sampler) < batch_size / rows).nonzero().flatten()
        X, y = data.X[index], data.y[index]
        if sampling == "poisson":  # same counts: start Opacus's step where ours starts
            optimizer.max_grad_norm = policy.current_clip
            with torch.no_grad():
                for p_theirs, p_ours in zip(theirs.parameters(), ours.parameters()):
                    p_theirs.copy_(p_ours)
        clip_before = policy.current_clip
        state = generator.get_state()
        grads = MaterialisedGradients(per_sample_gradients(ours, X, y, params=params))
        decision, _, total = release_step(grads, grads.norms, torch.zeros(len(y), dtype=torch.long), policy,
                                          n_groups=1, expected_batch_size=batch_size, generator=generator)
        apply_update(params, total, lr=lr, denominator=batch_size)
        replay = torch.Generator().set_state(state)  # the standard normals our release drew, in its order
        z_count = torch.randn((), generator=replay, dtype=torch.float64)
        z_params = [torch.randn(p.shape, generator=replay, dtype=p.dtype) for p in params.values()]
        draws = iter(z_params)

        def noise(std, reference, generator=None, secure_mode=False):
            if reference.dim() == 0:  # the unclipped count
                return z_count * float(std)
            return next(draws) * std

        opacus_clip_before = float(optimizer.max_grad_norm)
        optimizer.zero_grad()
        with warnings.catch_warnings():  # Opacus's hooks warn that the inputs need no gradient: they do not
            warnings.simplefilter("ignore", UserWarning)
            F.cross_entropy(module(X), y).backward()
        with mock.patch.object(adaclip, "_generate_noise", noise):
            optimizer.step()
        fraction_opacus = float(optimizer.unclipped_num) / len(y)
        centred = decision.record["centred_count"]
        records.append({
            "step": step, "batch_size": len(y), "expected_batch_size": batch_size,
            "clip_ours": clip_before, "clip_opacus": opacus_clip_before,
            "clip_next_ours": policy.current_clip, "clip_next_opacus": float(optimizer.max_grad_norm),
            "fraction_ours": decision.record["unclipped_fraction"],
            "fraction_ours_unclamped": centred / batch_size + 0.5,
            "fraction_opacus": fraction_opacus, "fraction_opacus_same_counts": fraction_opacus,
            "clip_rel_diff": abs(policy.current_clip - float(optimizer.max_grad_norm)) / policy.current_clip,
            "param_max_abs_diff": max(float((a.detach() - b.detach()).abs().max())
                                      for a, b in zip(ours.parameters(), theirs.parameters())),
        })
    return pd.DataFrame(records)


def opacus_count_accounting(settings: Sequence[tuple[int, float, int, int]] = ((256, 1.0, 36177, 2827),
                                                                            (32, 1.0, 36177, 22611),
                                                                            (256, 0.8, 54649, 12809)),
                            *, delta: float = 1e-6) -> pd.DataFrame:
    """What Opacus's AdaClip releases against what it accounts, per (b, sigma, n, T): it chooses the gradient's
    multiplier sigma_z by Theorem 1 for a count of multiplier 2 sigma_b (the centred count, contribution 1/2)
    and accounts sigma, but adds N(0, sigma_b^2) to the *uncentred* count (contribution 1, multiplier
    sigma_b), so what it releases has the joint multiplier (sigma_z^-2 + sigma_b^-2)^-1/2 < sigma.
    sigma_b = b/20 (Andrew et al.); epsilon under add/remove at ``delta``, RDP (this toolkit's accountant).
    Not counted: Opacus's division by the batch's actual (private) size."""
    rows = []
    for b, sigma, n, steps in settings:
        sigma_b = b / 20
        sigma_z = optq_gradient_multiplier(sigma, sigma_b)
        released = joint_noise_multiplier((sigma_b, sigma_z))
        rows.append({"batch_size": b, "sigma": sigma, "n": n, "steps": steps, "sigma_b": sigma_b, "sigma_z": sigma_z,
                     "joint_released": released,
                     "epsilon_accounted": epsilon_from_event(poisson_gaussian_event(b / n, sigma, steps=steps), delta),
                     "epsilon_released": epsilon_from_event(poisson_gaussian_event(b / n, released, steps=steps),
                                                            delta)})
    return pd.DataFrame(rows)
