"""Gaussian mechanisms as the toolkit uses them: several releases on one sampled batch.

A step of a private trainer may release more than one noisy quantity computed from the
same sampled batch (DPSGD-F releases noisy group counts, then a noisy clipped gradient
sum). If release i adds N(0, s_i^2 I) to a function f_i with l2-sensitivity Delta_i
under the neighbouring relation, its noise multiplier is sigma_i = s_i / Delta_i.

Joint release. Scale each block by 1/s_i; the scaled pair (f_1/s_1, f_2/s_2, ...) then
has unit-variance isotropic noise and l2-sensitivity

    sqrt(sum_i (Delta_i / s_i)^2) = sqrt(sum_i sigma_i^-2),

so the joint release is one Gaussian mechanism with noise multiplier

    sigma_joint = (sum_i sigma_i^-2)^(-1/2).

This holds when f_2's sensitivity bound is chosen from the (already noisy) output of
release 1, as long as s_2 = sigma_2 * Delta_2 with sigma_2 fixed: adaptive composition of
Gaussian mechanisms with fixed multipliers is the Gaussian mechanism with the combined
multiplier (Dong, Roth & Su 2019, Cor. 3.3: mu-GDP composes as sqrt(sum mu_i^2), with
mu_i = 1/sigma_i). Under Poisson sampling the step is a Poisson-sampled Gaussian with
sigma_joint, which is what the ledger records. This is tighter than (and never worse
than) accounting the releases as two separately sampled mechanisms.
"""

from __future__ import annotations

import math
from typing import Iterable

from dpfair_analysis.validation import check_positive


def joint_noise_multiplier(multipliers: Iterable[float]) -> float:
    """sigma_joint = (sum_i sigma_i^-2)^(-1/2) of Gaussian releases on the same input."""
    multipliers = [check_positive(m, "noise multiplier") for m in multipliers]
    if not multipliers:
        raise ValueError("joint_noise_multiplier needs at least one noise multiplier")
    return 1.0 / math.sqrt(sum(1.0 / m ** 2 for m in multipliers))
