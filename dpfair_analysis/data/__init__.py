"""Data: the :class:`~dpfair_analysis.data.GroupedDataset` container, one loader per data set, and a registry.

>>> from dpfair_analysis import data
>>> ds = data.load("adult")                      # 45,222 rows, 40 features, Male/Female
>>> data.list_datasets()                          # name, description, source, offline
>>> data.describe("compas")                       # per-group sizes and label rates

Raw files and their checksums live in :mod:`dpfair_analysis.data.sources`.
"""

from __future__ import annotations

import copy
import inspect
from collections import OrderedDict
from pathlib import Path

import pandas as pd

from dpfair_analysis.catalog import DATASETS, DatasetEntry
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


def _entry(name: str) -> DatasetEntry:
    if not isinstance(name, str) or name not in DATASETS:
        raise ValueError(f"name must be one of {list(DATASETS)}, got {name!r}")
    return DATASETS[name]


def load(name: str, **options) -> GroupedDataset:
    """Load registered data set ``name``; ``options`` go to its loader (see ``DATASETS``).

    An option the loader does not take is refused with the list of those it does.

    Parameters
    ----------
    name : str
        A registered data set (``list_datasets()``: adult, compas, german, mnist, bank, dutch, synthetic, ...).
    **options
        Passed to the data set's loader (e.g. ``by="race"`` for Adult's race groups, ``path=`` for a file you
        obtained).

    Returns
    -------
    GroupedDataset
        Features, labels and groups with their names.
    """
    loader = _entry(name).load_function()
    parameters = inspect.signature(loader).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
    allowed = [p for p, spec in parameters.items() if spec.kind is inspect.Parameter.KEYWORD_ONLY]
    unknown = sorted(set(options) - set(allowed))
    if unknown and not takes_any:
        raise ValueError(f"data set {name!r} takes options {allowed}, got {unknown}")
    key = _loaded_key(_entry(name), loader, options)
    if key is not None and key in _LOADED:
        _LOADED.move_to_end(key)
        return copy.deepcopy(_LOADED[key])
    dataset = loader(**options)
    if key is not None and _nbytes(dataset) <= LOADED_BYTES_PER_SET:
        _LOADED[key] = copy.deepcopy(dataset)
        while len(_LOADED) > LOADED_SETS:
            _LOADED.popitem(last=False)
    return dataset


#: :func:`load` keeps up to this many data sets of at most this many bytes in the process and returns a copy of one
#: loaded before with the same options from the same verified bytes (a study or a notebook loads one data set tens of
#: times: Adult takes 0.6 s to parse, its copy 4 ms); full MNIST (220 MB) is not kept
LOADED_SETS = 8
LOADED_BYTES_PER_SET = 32 * 2 ** 20
_LOADED: OrderedDict[tuple, GroupedDataset] = OrderedDict()
#: options that name files or folders to read instead of the registered raw files: such a load is never kept
_PATH_OPTIONS = ("root", "path")


def _loaded_key(entry: DatasetEntry, loader, options: dict) -> tuple | None:
    """What a kept data set is looked up by: the entry, its loading function, its options and the registered SHA-256
    of each raw file, once the cached file is verified against it (:func:`sources.verify`: a kept data set is the
    parse of exactly those bytes). None where a load must not be kept -- generated data (no raw files: cheap, and
    made from its options), a loader a user added, an option naming a file or of an unplain type, or a raw file not
    cached or failing its checksum (the loader then fetches it, or moves it aside, and says so as it always does)."""
    if not entry.raw_files or callable(entry.loader) or any(option in _PATH_OPTIONS for option in options):
        return None
    if not all(value is None or isinstance(value, (str, int, float, bool, tuple)) for value in options.values()):
        return None
    try:
        for raw in entry.raw_files:
            sources.verify(raw, sources.cached_path(raw))  # reads, moves and fetches nothing
    except Exception:  # noqa: BLE001  absent or failing: the loader fetches it (or moves it aside) and says so
        return None
    return (entry.name, loader, repr(sorted(options.items())),
            tuple(sources.RAW_FILES[raw].sha256 for raw in entry.raw_files))


def _nbytes(dataset: GroupedDataset) -> int:
    return sum(t.element_size() * t.nelement() for t in (dataset.X, dataset.y, dataset.group))


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
