"""The one container every part of the toolkit passes around: features, labels, groups.

A :class:`GroupedDataset` holds tensors ``X`` (n, ...), ``y`` (n,) and ``group`` (n,)
plus the names that make results readable. Everything that selects rows (subsets,
train/test splits, per-group views, rebalancing such as "class 8 of MNIST cut to 500"
or "balanced Adult, 14,000 per sex") lives here, once, and validates its arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from dpfair_analysis.errors import ArgumentError
from dpfair_analysis.validation import check_fraction, check_positive_int, check_seed


@dataclass(frozen=True)
class GroupedDataset:
    """Features ``X``, integer labels ``y`` and integer group ids ``group``.

    Parameters
    ----------
    X : torch.Tensor
        Float features, first dimension n (tabular: (n, d); images: (n, 1, 28, 28)).
    y : torch.Tensor
        Integer labels in ``0 .. len(label_names) - 1``, shape (n,).
    group : torch.Tensor
        Integer group ids in ``0 .. len(group_names) - 1``, shape (n,).
    feature_names, group_names, label_names : tuple of str
        Names for the feature columns (may be empty for images), the groups and the
        labels.
    name : str
        The data set's name (``"adult"``, ``"mnist"``, ...).
    """

    X: torch.Tensor
    y: torch.Tensor
    group: torch.Tensor
    group_names: tuple[str, ...]
    label_names: tuple[str, ...]
    feature_names: tuple[str, ...] = ()
    name: str = "dataset"
    info: Mapping[str, object] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.X, torch.Tensor) or not self.X.is_floating_point():
            raise TypeError(f"X must be a floating-point torch.Tensor, got {type(self.X).__name__}"
                            + (f" of dtype {self.X.dtype}" if isinstance(self.X, torch.Tensor) else ""))
        n = self.X.shape[0]
        for arg in ("y", "group"):
            value = getattr(self, arg)
            if not isinstance(value, torch.Tensor) or value.dtype != torch.int64 or value.shape != (n,):
                raise TypeError(f"{arg} must be an int64 tensor of shape ({n},), got "
                                f"{getattr(value, 'dtype', type(value).__name__)} "
                                f"{tuple(getattr(value, 'shape', ()))}")
        if not _all_finite(self.X):
            bad = int((~torch.isfinite(self.X)).reshape(n, -1).any(dim=1).sum())
            raise ValueError(f"X has NaN or infinite values in {bad} rows; clean or impute them first")
        object.__setattr__(self, "group_names", tuple(self.group_names))
        object.__setattr__(self, "label_names", tuple(self.label_names))
        object.__setattr__(self, "feature_names", tuple(self.feature_names))
        _check_ids(self.y, len(self.label_names), "y", "labels")
        _check_ids(self.group, len(self.group_names), "group", "groups")
        if self.feature_names and self.X.ndim == 2 and len(self.feature_names) != self.X.shape[1]:
            raise ValueError(f"feature_names has {len(self.feature_names)} names for "
                             f"{self.X.shape[1]} feature columns")

    # ------------------------------------------------------------------ sizes
    def __len__(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_features(self) -> int:
        """Number of input features per sample (product of the non-batch dimensions)."""
        return int(np.prod(self.X.shape[1:]))

    @property
    def n_groups(self) -> int:
        return len(self.group_names)

    @property
    def n_classes(self) -> int:
        return len(self.label_names)

    def group_sizes(self) -> torch.Tensor:
        """Rows per group, shape (n_groups,)."""
        return torch.bincount(self.group, minlength=self.n_groups)

    def to(self, device: torch.device | str) -> "GroupedDataset":
        """The same data with ``X``, ``y`` and ``group`` on ``device`` (``self`` if they are there already)."""
        device = torch.device(device)
        if self.X.device == device and self.y.device == device and self.group.device == device:
            return self
        return replace(self, X=self.X.to(device), y=self.y.to(device), group=self.group.to(device))

    # --------------------------------------------------------------- selecting
    def subset(self, index: torch.Tensor | np.ndarray | Sequence[int]) -> "GroupedDataset":
        """Rows ``index`` (integer positions or a boolean mask), same names."""
        index = torch.as_tensor(np.asarray(index))
        if index.dtype == torch.bool:
            if index.shape != (len(self),):
                raise ValueError(f"a boolean index must have shape ({len(self)},), got {tuple(index.shape)}")
            index = index.nonzero().flatten()
        index = index.long()
        return replace(self, X=self.X[index], y=self.y[index], group=self.group[index])

    def group_view(self, k: int | str) -> "GroupedDataset":
        """The rows of one group, given by id or name."""
        k = self.group_id(k)
        return self.subset(self.group == k)

    def group_id(self, k: int | str) -> int:
        """The integer id of group ``k`` (an id or a name), checked."""
        if isinstance(k, str):
            if k not in self.group_names:
                raise ValueError(f"group {k!r} is not one of {list(self.group_names)}")
            return self.group_names.index(k)
        if not 0 <= int(k) < self.n_groups:
            raise ValueError(f"group id {k} is outside 0..{self.n_groups - 1}")
        return int(k)

    def split(self, test_fraction: float = 0.2, *, seed: int = 0,
              stratify: str | None = "group") -> tuple["GroupedDataset", "GroupedDataset"]:
        """Random train/test split, by default stratified by group so group shares match.

        ``stratify`` is ``"group"``, ``"group_label"`` (each group x label cell) or None.
        Raises if a group present in the data ends with no rows on either side.
        """
        check_fraction(test_fraction, "test_fraction", open_low=True, open_high=True)
        rng = np.random.default_rng(check_seed(seed))
        n = len(self)
        if stratify is None:
            strata = np.zeros(n, dtype=np.int64)
        elif stratify == "group":
            strata = self.group.numpy()
        elif stratify == "group_label":
            strata = self.group.numpy() * self.n_classes + self.y.numpy()
        else:
            raise ValueError(f"stratify must be 'group', 'group_label' or None, got {stratify!r}")
        test_mask = np.zeros(n, dtype=bool)
        for s in np.unique(strata):
            rows = np.flatnonzero(strata == s)
            n_test = int(round(test_fraction * len(rows)))
            test_mask[rng.choice(rows, size=n_test, replace=False)] = True
        train, test = self.subset(~torch.from_numpy(test_mask)), self.subset(torch.from_numpy(test_mask))
        present = self.group_sizes() > 0
        for part, part_name in ((train, "train"), (test, "test")):
            empty = present & (part.group_sizes() == 0)
            if empty.any():
                names = [self.group_names[i] for i in empty.nonzero().flatten().tolist()]
                raise ValueError(f"after the split, group(s) {names} have no rows in the {part_name} "
                                 f"set; use a different test_fraction or more data")
        return train, test

    def resample_groups(self, sizes: Mapping[int | str, int], *, seed: int = 0) -> "GroupedDataset":
        """Keep ``sizes[k]`` rows of each named group, drawn without replacement.

        Groups not named keep all their rows. This is how the papers build their
        variants: balanced Adult (14,000 men, 14,000 women), unbalanced Dutch
        (30,000 / 10,000), unbalanced MNIST (class 8 cut to 500).
        """
        rng = np.random.default_rng(check_seed(seed))
        available = self.group_sizes().tolist()
        by_id: dict[int, int] = {}
        for k, size in sizes.items():
            kid = self.group_id(k)
            if kid in by_id:
                raise ValueError(f"sizes names group {self.group_names[kid]!r} twice (by id and by name)")
            check_positive_int(size, f"sizes[{k!r}]")
            if size > available[kid]:
                raise ValueError(f"sizes[{k!r}]={size} exceeds the {available[kid]} rows of group "
                                 f"{self.group_names[kid]!r}")
            by_id[kid] = int(size)
        keep = np.ones(len(self), dtype=bool)
        for kid, size in by_id.items():
            rows = np.flatnonzero(self.group.numpy() == kid)
            keep[rng.choice(rows, size=available[kid] - size, replace=False)] = False
        return self.subset(torch.from_numpy(keep))

    def with_groups(self, group: torch.Tensor, group_names: Sequence[str]) -> "GroupedDataset":
        """The same rows with a different grouping (e.g. MNIST classes as groups)."""
        return replace(self, group=group, group_names=tuple(group_names))

    # -------------------------------------------------------------- reporting
    def describe(self) -> pd.DataFrame:
        """One row per group and one for all: rows, share, and rate of each label."""
        rows = []
        for k, name in [(None, "all")] + list(enumerate(self.group_names)):
            mask = torch.ones(len(self), dtype=torch.bool) if k is None else self.group == k
            n_k = int(mask.sum())
            row: dict[str, object] = {"group": name, "n": n_k, "share": n_k / max(len(self), 1)}
            counts = torch.bincount(self.y[mask], minlength=self.n_classes)
            for label, c in zip(self.label_names, counts.tolist()):
                row[f"rate[{label}]"] = c / n_k if n_k else float("nan")
            rows.append(row)
        return pd.DataFrame(rows)


def _check_ids(ids: torch.Tensor, count: int, arg: str, what: str) -> None:
    if count < 1:
        raise ValueError(f"need at least one name for the {what}")
    if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= count):
        raise ValueError(f"{arg} has values in [{int(ids.min())}, {int(ids.max())}] but there are "
                         f"{count} {what} (allowed 0..{count - 1})")


def comparison_split(full: GroupedDataset, *, seed: int, test_fraction: float = 0.2,
                     train_group_fraction: Mapping[int | str, float] | None = None, train_subsample: float = 1.0,
                     official_test: GroupedDataset | None = None) -> tuple[GroupedDataset, GroupedDataset]:
    """The (train, test) pair a comparison of methods trains and evaluates on, for one seed.

    The one definition shared by ``experiments.compare`` (which measures per-group costs)
    and ``diagnose`` (which predicts them), so that a diagnosis is made on exactly the rows
    the comparison uses:

    1. the test set: ``official_test`` if given (``full`` is then the training set),
       else a group-stratified random ``test_fraction`` of ``full`` (:meth:`GroupedDataset.split`);
    2. ``train_group_fraction`` keeps round(fraction x size) (at least 1) training rows of
       each named group -- paper 000's unbalanced MNIST (class 8 cut to 500 of 5,851); the
       test set is untouched;
    3. ``train_subsample`` < 1 keeps that share of the training rows, stratified by group.
    """
    if official_test is not None:
        train_data, test_data = full, official_test
    else:
        train_data, test_data = full.split(test_fraction, seed=seed)
    if train_group_fraction:
        unknown = [g for g in train_group_fraction if isinstance(g, str) and g not in full.group_names]
        if unknown:
            raise ArgumentError("train_group_fraction", f"group(s) {unknown} are not groups of {full.name}; its "
                                f"groups are {list(full.group_names)}")
        sizes = train_data.group_sizes()
        train_data = train_data.resample_groups(
            {g: max(1, round(f * int(sizes[train_data.group_id(g)]))) for g, f in train_group_fraction.items()},
            seed=seed)
    check_fraction(train_subsample, "train_subsample")
    if train_subsample < 1:
        train_data, _ = train_data.split(1 - train_subsample, seed=seed)
    return train_data, test_data


#: Rows of X checked for finiteness at a time (:func:`_all_finite`)
FINITE_CHECK_ROWS = 4096


def _all_finite(X: torch.Tensor) -> bool:
    """Whether every entry of ``X`` is finite, checked :data:`FINITE_CHECK_ROWS` rows at a time: ``torch.isfinite``
    of a float tensor makes temporaries of its size (|x| among them), which for full MNIST's 60,000 images took the
    loader's peak resident memory up by 313 MB."""
    return all(bool(torch.isfinite(part).all()) for part in X.split(FINITE_CHECK_ROWS))

