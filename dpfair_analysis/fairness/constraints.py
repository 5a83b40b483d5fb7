"""Group-fairness constraints as data: sets of (population subset, group subset, h) terms.

paper 003 (Tran, Fioretto & Van Hentenryck, AAAI'21), Eq. (1): a fairness notion is a
set of constraint terms i in I,

.. math:: \\mu(D_{P_i}) - \\mu(D_{G_i}) = 0, \\qquad
          \\mu(S) = \\frac{1}{|S|} \\sum_{z \\in S} h(z),

where the *population* subset :math:`D_{P_i}` uses public data only (features and
labels) and the *group* subset :math:`D_{G_i} \\subseteq D_{P_i}` also uses the
sensitive attribute A. One :class:`FairnessConstraint` object drives

(a) the Lagrangian terms :math:`\\mu(B_P) - \\mu(B_G)` (:meth:`FairnessConstraint.term_gaps`),
(b) the fairness-violation metric the paper reports -- the largest difference of the
    constraint quantity between any two groups, computed with *hard* predictions
    (:meth:`FairnessConstraint.violation`), and
(c) the sensitivity analysis (:attr:`FairnessConstraint.max_terms_per_person`,
    :attr:`FairnessConstraint.h_signed`, :attr:`FairnessConstraint.h_bound`, masks).

The three kinds::

    =====  =========================================  =============================  ====================
    kind   terms (|I|)                                 h(z) for training (soft)        hard h (metric)
    =====  =========================================  =============================  ====================
    dp     one per group k: P = all, G = {A = k}       p_theta(positive | x) in [0,1]  1[y_hat = positive]
    eo     one per (label y, group k): P = {Y = y},    p_theta(positive | x) in [0,1]  1[y_hat = positive]
           G = {Y = y, A = k}  (2|A| for binary y)
    ap     one per group k: P = all, G = {A = k}       cross-entropy loss >= 0          1[y_hat != y]
                                                       (unbounded above)
    =====  =========================================  =============================  ====================

All three h are *unsigned* (>= 0); dp and eo are bounded by 1, ap is unbounded (so the
dual clipping bound C_d binds only for ap). Every person belongs to the group subset of
exactly one term (``max_terms_per_person == 1``), which the sensitivity bounds use.

Missing sensitive values (paper 003 Sec. 7) are passed as a boolean ``reported`` mask:
a person whose group is not reported is in the population subsets but in no group
subset.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import pandas as pd
import torch
import torch.nn.functional as F

from dpfair_analysis.validation import check_choice, check_int_at_least

KINDS = ("dp", "eo", "ap")
KIND_NAMES = {"dp": "demographic parity", "eo": "equalized odds", "ap": "accuracy parity"}

__all__ = ["KINDS", "ConstraintTerm", "FairnessConstraint", "make_constraint"]


@dataclass(frozen=True)
class ConstraintTerm:
    """One term of Eq. (1).

    ``label`` restricts the population subset to ``Y == label`` (None: everyone);
    the group subset is the population subset intersected with ``A == group``.
    """

    name: str
    group: int
    label: int | None = None


@dataclass(frozen=True)
class FairnessConstraint:
    """A fairness notion as a tuple of :class:`ConstraintTerm` plus its h.

    Build with :func:`make_constraint`. Tensors passed in: ``logits`` (n, n_classes),
    ``y`` (n,) int64, ``group`` (n,) int64, ``reported`` (n,) bool or None (all reported).
    """

    kind: str
    terms: tuple[ConstraintTerm, ...]
    n_groups: int
    n_classes: int = 2
    positive_class: int = 1
    group_names: tuple[str, ...] = ()

    # ------------------------------------------------------------ properties of h
    @property
    def name(self) -> str:
        return KIND_NAMES[self.kind]

    @property
    def h_signed(self) -> bool:
        """False: every h here is >= 0 (probabilities or losses)."""
        return False

    @property
    def h_bound(self) -> float | None:
        """Upper bound of |h| (1 for probabilities), None when unbounded (ap's loss)."""
        return None if self.kind == "ap" else 1.0

    @property
    def max_terms_per_person(self) -> int:
        """Largest number of group subsets one person can be in (1 for dp, eo, ap)."""
        return 1

    @property
    def n_terms(self) -> int:
        return len(self.terms)

    @property
    def term_names(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.terms)

    # ------------------------------------------------------------------ h values
    def h(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Soft (differentiable) h per sample, shape (n,): see the module table."""
        if self.kind == "ap":
            return F.cross_entropy(logits, y, reduction="none")
        return torch.softmax(logits, dim=-1)[..., self.positive_class]

    def h_hard(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Hard h per sample (the metric's): positive prediction, or misclassification for ap."""
        pred = logits.argmax(dim=-1)
        if self.kind == "ap":
            return (pred != y).double()
        return (pred == self.positive_class).double()

    # ------------------------------------------------------------------- subsets
    def population_masks(self, y: torch.Tensor) -> torch.Tensor:
        """(n, |I|) bool: row z is in D_{P_i}. Public (labels only)."""
        cols = [torch.ones_like(y, dtype=torch.bool) if t.label is None else y == t.label for t in self.terms]
        return torch.stack(cols, dim=1) if cols else torch.zeros((len(y), 0), dtype=torch.bool)

    def group_masks(self, y: torch.Tensor, group: torch.Tensor,
                    reported: torch.Tensor | None = None) -> torch.Tensor:
        """(n, |I|) bool: row z is in D_{G_i}. Uses the sensitive attribute."""
        pop = self.population_masks(y)
        cols = torch.stack([group == t.group for t in self.terms], dim=1)
        out = pop & cols
        if reported is not None:
            out = out & reported.to(torch.bool).unsqueeze(1)
        return out

    # ---------------------------------------------------------------- the means
    def _term_sums(self, h: torch.Tensor, y: torch.Tensor, group: torch.Tensor,
                   reported: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(sum of h over D_P, |D_P|, sum over D_G, |D_G|) per term, each shape (|I|,)."""
        pop = self.population_masks(y).to(h.dtype)
        grp = self.group_masks(y, group, reported).to(h.dtype)
        return (h.unsqueeze(1) * pop).sum(0), pop.sum(0), (h.unsqueeze(1) * grp).sum(0), grp.sum(0)

    def term_means(self, h: torch.Tensor, y: torch.Tensor, group: torch.Tensor,
                   reported: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(mu_P, mu_G, |G_i|), each shape (|I|,); an empty subset has mean NaN (for tables and
        metrics; the Lagrangian differentiates :meth:`term_gaps`, which has no NaN)."""
        sum_p, n_pop, sum_g, n_grp = self._term_sums(h, y, group, reported)
        return sum_p / n_pop, sum_g / n_grp, n_grp

    def term_gaps(self, h: torch.Tensor, y: torch.Tensor, group: torch.Tensor,
                  reported: torch.Tensor | None = None) -> torch.Tensor:
        """mu(D_P) - mu(D_G) per term, shape (|I|,), 0 where the group subset is empty (D_G is part of D_P).

        Differentiable in ``h`` (the Lagrangian uses it with autograd), with a finite gradient on a
        batch that misses a group-label cell: the means divide by max(n, 1), so the masked-out term
        has gradient 0 -- dividing by n = 0 under ``torch.where`` gives a NaN gradient, which made
        non-private F-LD diverge on Bank's small group under equalized odds.
        """
        sum_p, n_pop, sum_g, n_grp = self._term_sums(h, y, group, reported)
        gap = sum_p / n_pop.clamp(min=1) - sum_g / n_grp.clamp(min=1)
        return torch.where(n_grp > 0, gap, torch.zeros_like(gap))

    # ------------------------------------------------------------------- metric
    def violation(self, logits: torch.Tensor, y: torch.Tensor, group: torch.Tensor, *,
                  hard: bool = True) -> float:
        """The paper's fairness violation: max over pairs of groups (a, b) of
        |mu(G_a) - mu(G_b)| within the same population subset, with hard h by default.

        dp: max_{a,b} |P(y_hat=1|A=a) - P(y_hat=1|A=b)|; eo: the same within Y=0 and Y=1,
        maximised over y; ap: max_{a,b} |err(a) - err(b)|. Empty groups are skipped.
        """
        with torch.no_grad():
            values = self.h_hard(logits, y) if hard else self.h(logits, y).double()
            return violation_from_h(self, values, y, group)

    def group_table(self, logits: torch.Tensor, y: torch.Tensor, group: torch.Tensor) -> pd.DataFrame:
        """Tidy per-term table: term, population mean, group mean, group size (hard h)."""
        with torch.no_grad():
            values = self.h_hard(logits, y)
            mu_p, mu_g, n_g = self.term_means(values, y, group)
        return pd.DataFrame({"term": self.term_names, "population_mean": mu_p.numpy(),
                             "group_mean": mu_g.numpy(), "group_size": n_g.numpy().astype(int)})


def violation_from_h(constraint: FairnessConstraint, h: torch.Tensor, y: torch.Tensor,
                     group: torch.Tensor) -> float:
    """Max pairwise difference of group means of ``h`` among terms sharing a population."""
    _, mu_g, n_g = constraint.term_means(h.double(), y, group)
    worst = 0.0
    by_pop: dict[int | None, list[int]] = {}
    for i, t in enumerate(constraint.terms):
        by_pop.setdefault(t.label, []).append(i)
    for idx in by_pop.values():
        present = [i for i in idx if n_g[i] > 0]
        for a, b in combinations(present, 2):
            worst = max(worst, abs(float(mu_g[a] - mu_g[b])))
    return worst


def make_constraint(kind: str, *, n_groups: int, n_classes: int = 2, positive_class: int = 1,
                    group_names: tuple[str, ...] | list[str] | None = None) -> FairnessConstraint:
    """The constraint terms of paper 003 Examples 1-3 for ``n_groups`` groups.

    Parameters
    ----------
    kind : {"dp", "eo", "ap"}
        Demographic parity (Example 1), equalized odds (Example 2), accuracy parity
        (Example 3).
    n_groups : int
        Number of protected groups |A| (>= 2).
    n_classes : int
        Number of label classes; dp and eo need the binary case (the paper's
        :math:`\\mathcal Y = \\{0, 1\\}`), ap accepts any.
    positive_class : int
        The class whose predicted probability is h for dp and eo.
    group_names : sequence of str, optional
        For readable term names.
    """
    kind = check_choice(kind, "constraint", KINDS)
    check_int_at_least(n_groups, "n_groups", 2)
    check_int_at_least(n_classes, "n_classes", 2)
    if kind in ("dp", "eo") and n_classes != 2:
        raise ValueError(f"constraint {kind!r} needs binary labels (n_classes=2), got n_classes={n_classes}")
    if not 0 <= positive_class < n_classes:
        raise ValueError(f"positive_class must be in 0..{n_classes - 1}, got {positive_class!r}")
    names = tuple(group_names) if group_names is not None else tuple(str(k) for k in range(n_groups))
    if len(names) != n_groups:
        raise ValueError(f"group_names has {len(names)} names for n_groups={n_groups}")
    if kind == "eo":
        terms = tuple(ConstraintTerm(f"y={y},group={names[k]}", k, y) for y in range(n_classes)
                      for k in range(n_groups))
    else:
        terms = tuple(ConstraintTerm(f"group={names[k]}", k, None) for k in range(n_groups))
    return FairnessConstraint(kind=kind, terms=terms, n_groups=int(n_groups), n_classes=int(n_classes),
                              positive_class=int(positive_class), group_names=names)
