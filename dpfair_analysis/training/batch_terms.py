"""What the training loop logs of Esipova et al.'s direction/magnitude split of the clipping term, per batch:
the first-order terms from the batch's own sums (the full terms, with Hessians, are
:func:`~dpfair_analysis.theory.decomposition.direction_magnitude`'s). Here, on the training floor, because
the loop computes them; :mod:`dpfair_analysis.theory.decomposition` re-exports it."""

from __future__ import annotations

import torch

from dpfair_analysis.validation import check_positive


def batch_direction_magnitude(group_sums: torch.Tensor, clipped_sum: torch.Tensor, self_products: torch.Tensor,
                              clipped_self_products: torch.Tensor, counts: torch.Tensor, *, lr: float,
                              expected_batch_size: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The first-order R_a^dir and R_a^mag of one sampled batch, per group and for all (what the training
    history logs; :func:`~dpfair_analysis.theory.decomposition.direction_magnitude` with the group gradients estimated on the same batch).

    With S_a = sum_{i in B, a} g_i, S = sum_a S_a, Sbar = sum_i c_i g_i (c_i the step's clipping coefficient,
    weights included), b the expected batch size, g = S / b, gbar = Sbar / b and s = ||Sbar|| / ||S|| (the
    paper's per-batch step and its clipped twin), the group's gradient enters only through inner products,
    estimated without each row's product with itself (which would bias them by ||g_i||^2 / (n_a b))::

        <g_a, g>    ~ (<S_a, S>    - sum_{i in a} ||g_i||^2)     / (n_a b)
        <g_a, gbar> ~ (<S_a, Sbar> - sum_{i in a} c_i ||g_i||^2) / (n_a b)
        R_a^dir = eta (s <g_a, g> - <g_a, gbar>),   R_a^mag = eta (1 - s) <g_a, g>

    Parameters
    ----------
    group_sums : torch.Tensor
        (K, P): S_a for each group.
    clipped_sum : torch.Tensor
        (P,): Sbar, before noise.
    self_products, clipped_self_products : torch.Tensor
        (K,): sum_{i in a} ||g_i||^2 and sum_{i in a} c_i ||g_i||^2.
    counts : torch.Tensor
        (K,): n_a, the group's rows in the batch.
    lr, expected_batch_size : float
        eta and b.

    Returns
    -------
    (direction, magnitude) : tuple of torch.Tensor
        (K + 1,) each, float64: the groups, then all; NaN for a group absent from the batch.
    """
    eta = check_positive(lr, "lr")
    b = check_positive(expected_batch_size, "expected_batch_size")
    sums = torch.cat([group_sums, group_sums.sum(0, keepdim=True)]).double()
    selves = torch.cat([self_products, self_products.sum().reshape(1)]).double()
    clipped_selves = torch.cat([clipped_self_products, clipped_self_products.sum().reshape(1)]).double()
    rows = torch.cat([counts, counts.sum().reshape(1)]).double()
    total, clipped = sums[-1], clipped_sum.double()
    length = float(total.norm())
    s = float(clipped.norm()) / length if length > 0 else 1.0
    scale = torch.where(rows > 0, 1.0 / (rows.clamp(min=1) * b), torch.nan)
    plain = (sums @ total - selves) * scale
    turned = (sums @ clipped - clipped_selves) * scale
    return eta * (s * plain - turned), eta * (1.0 - s) * plain
