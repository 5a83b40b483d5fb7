"""Paper 003 (Tran, Fioretto & Van Hentenryck, AAAI'21): Table 2 and Figures 1-5 as functions.

* :func:`table2` -- 5-fold stratified cross-validation (scikit-learn ``StratifiedKFold``,
  seeded, strata = group x label) of CLF, Z, A, M (:mod:`dpfair_analysis.training.baselines`)
  and PF-LD / F-LD (:mod:`dpfair_analysis.training.lagrangian`) per fairness constraint,
  at the paper's settings (epsilon = 1, delta = 1e-5, C_p = 10, C_d = 5; the core's
  defaults and noise calibration for everything the paper leaves open). One tidy row
  per (method, constraint, fold); :func:`summarize` gives mean (sd) and
  :func:`side_by_side` puts them beside :data:`PAPER_TABLE2`.
* sweeps returning tidy frames: :func:`epsilon_sweep` (Fig. 1, PF-LD and M),
  :func:`clip_sweep` (Fig. 2 and, from the same runs, Fig. 3's share of per-sample
  group-gradient norms above C_p), :func:`dual_clip_sweep` (Fig. 4), :func:`missing_sweep`
  (Fig. 5, missing sensitive values).

Profiles (as in :mod:`dpfair_analysis.experiments.dpsgdf`): ``"full"`` is the paper's
protocol (5 folds, all rows, 10 epochs -- the paper gives no epoch count, 10 is the
core's default); ``"quick"`` (CI, notebooks' smoke run) subsamples the data, runs 2
folds and 2 epochs. Every run is cached (:class:`~dpfair_analysis.experiments.cache.RunCache`)
by its full configuration, so an interrupted sweep resumes.

PF-LD variant: ``"pfld"`` is the toolkit's corrected PF-LD (sum releases with public
denominators, PLD accounting under replace-one; privacy established). ``"pfld-paper"``
runs the paper's Eqs. (7), (10), (11), (13) and Theorem 5 bookkeeping as printed
(``paper_exact=True``) -- its epsilon is **not** a valid guarantee
(:mod:`dpfair_analysis.privacy.sensitivity` refutes the printed sensitivities).
``"pfld-shared-batch"`` is the corrected PF-LD with its public part on the private batch
(``public_batch="shared"``, the design shipped before the public part got its own batch):
its epsilon is **not** valid either (the update reveals who was sampled); it stays in the
table to show what the fix costs.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Any, Sequence

import numpy as np
import pandas as pd

from dpfair_analysis import data as datasets
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.experiments.cache import RunCache, config_key
from dpfair_analysis.experiments.sweep import Backend, Run, run_sweep
from dpfair_analysis.experiments.tuning import Tolerance, TuningGrid, describe_configuration
from dpfair_analysis.fairness.constraints import KINDS, make_constraint
from dpfair_analysis.validation import check_choice, check_positive, check_positive_int, check_seed

PROFILES = ("quick", "full")
TABLE_METHODS = ("clf", "z", "a", "m", "pfld")
ALL_METHODS = ("clf", "z", "a", "m", "pfld", "fld", "pfld-paper", "pfld-shared-batch")
METHOD_LABELS = {"clf": "CLF", "z": "Z", "a": "A", "m": "M", "pfld": "PF-LD", "fld": "F-LD",
                 "pfld-paper": "PF-LD (paper-exact)", "pfld-shared-batch": "PF-LD (shared batch, control)"}
PRIVATE_METHODS = ("m", "pfld", "pfld-paper", "pfld-shared-batch")

#: Table 2's data sets -> the registered data set (``income`` is registered in :mod:`dpfair_analysis.data`;
#: ``adult`` here means the same: PF-LD always runs on Adult with its own preprocessing).
DATASETS = {"income": "income", "adult": "income", "compas": "compas", "german": "german", "bank": "bank"}

#: paper 003 Table 2 (Income, COMPAS, Bank, M-Bank3, M-Bank5), copied from the paper (its "DF-LP" column is
#: PF-LD). accuracy / fairness violation: mean (sd) over 5-fold cross-validation.
PAPER_TABLE2 = pd.DataFrame([
    # dataset, constraint, method, accuracy, accuracy_sd, violation, violation_sd
    ("income", "ap", "clf", 0.848, 0.003, 0.114, 0.005), ("income", "ap", "z", 0.848, 0.004, 0.114, 0.007),
    ("income", "ap", "a", 0.834, 0.005, 0.093, 0.006), ("income", "ap", "m", 0.842, 0.004, 0.110, 0.006),
    ("income", "ap", "pfld", 0.782, 0.008, 0.061, 0.019),
    ("income", "dp", "clf", 0.848, 0.003, 0.181, 0.007), ("income", "dp", "z", 0.827, 0.019, 0.039, 0.012),
    ("income", "dp", "a", 0.789, 0.031, 0.044, 0.053), ("income", "dp", "m", 0.792, 0.035, 0.063, 0.054),
    ("income", "dp", "pfld", 0.799, 0.002, 0.019, 0.009),
    ("income", "eo", "clf", 0.848, 0.003, 0.094, 0.013), ("income", "eo", "z", 0.842, 0.003, 0.102, 0.022),
    ("income", "eo", "a", 0.840, 0.003, 0.042, 0.005), ("income", "eo", "m", 0.837, 0.002, 0.064, 0.014),
    ("income", "eo", "pfld", 0.841, 0.003, 0.044, 0.006),
    ("compas", "ap", "clf", 0.683, 0.011, 0.024, 0.014), ("compas", "ap", "z", 0.677, 0.013, 0.016, 0.008),
    ("compas", "ap", "a", 0.675, 0.013, 0.033, 0.022), ("compas", "ap", "m", 0.661, 0.019, 0.016, 0.012),
    ("compas", "ap", "pfld", 0.671, 0.015, 0.031, 0.029),
    ("compas", "dp", "clf", 0.683, 0.011, 0.121, 0.022), ("compas", "dp", "z", 0.634, 0.017, 0.023, 0.012),
    ("compas", "dp", "a", 0.643, 0.014, 0.048, 0.023), ("compas", "dp", "m", 0.664, 0.014, 0.092, 0.032),
    ("compas", "dp", "pfld", 0.667, 0.015, 0.098, 0.037),
    ("compas", "eo", "clf", 0.683, 0.011, 0.118, 0.038), ("compas", "eo", "z", 0.647, 0.011, 0.049, 0.033),
    ("compas", "eo", "a", 0.662, 0.019, 0.097, 0.044), ("compas", "eo", "m", 0.670, 0.013, 0.139, 0.036),
    ("compas", "eo", "pfld", 0.677, 0.015, 0.115, 0.040),
    # Bank: age 25-60 against the rest; M-Bank3 / M-Bank5: 3 and 5 age groups (Z is NA in the paper there)
    ("bank", "ap", "clf", 0.800, 0.007, 0.041, 0.021), ("bank", "ap", "z", 0.801, 0.005, 0.025, 0.015),
    ("bank", "ap", "a", 0.808, 0.004, 0.006, 0.004), ("bank", "ap", "m", 0.799, 0.007, 0.036, 0.019),
    ("bank", "ap", "pfld", 0.812, 0.004, 0.021, 0.009),
    ("bank", "dp", "clf", 0.800, 0.007, 0.299, 0.034), ("bank", "dp", "z", 0.780, 0.009, 0.030, 0.021),
    ("bank", "dp", "a", 0.772, 0.010, 0.030, 0.017), ("bank", "dp", "m", 0.784, 0.008, 0.131, 0.048),
    ("bank", "dp", "pfld", 0.793, 0.013, 0.126, 0.027),
    ("bank", "eo", "clf", 0.800, 0.007, 0.239, 0.046), ("bank", "eo", "z", 0.791, 0.006, 0.113, 0.054),
    ("bank", "eo", "a", 0.764, 0.007, 0.125, 0.055), ("bank", "eo", "m", 0.796, 0.006, 0.252, 0.103),
    ("bank", "eo", "pfld", 0.808, 0.004, 0.188, 0.076),
    ("m-bank3", "ap", "clf", 0.807, 0.008, 0.064, 0.021), ("m-bank3", "ap", "a", 0.813, 0.005, 0.037, 0.012),
    ("m-bank3", "ap", "m", 0.817, 0.009, 0.040, 0.032), ("m-bank3", "ap", "pfld", 0.827, 0.007, 0.033, 0.007),
    ("m-bank3", "dp", "clf", 0.807, 0.008, 0.317, 0.035), ("m-bank3", "dp", "a", 0.771, 0.008, 0.067, 0.026),
    ("m-bank3", "dp", "m", 0.797, 0.006, 0.261, 0.085), ("m-bank3", "dp", "pfld", 0.811, 0.008, 0.218, 0.033),
    ("m-bank3", "eo", "clf", 0.807, 0.008, 0.244, 0.070), ("m-bank3", "eo", "a", 0.783, 0.004, 0.199, 0.054),
    ("m-bank3", "eo", "m", 0.808, 0.010, 0.348, 0.133), ("m-bank3", "eo", "pfld", 0.825, 0.006, 0.279, 0.082),
    ("m-bank5", "ap", "clf", 0.807, 0.008, 0.078, 0.013), ("m-bank5", "ap", "a", 0.809, 0.007, 0.055, 0.018),
    ("m-bank5", "ap", "m", 0.814, 0.008, 0.059, 0.009), ("m-bank5", "ap", "pfld", 0.827, 0.007, 0.046, 0.008),
    ("m-bank5", "dp", "clf", 0.807, 0.008, 0.341, 0.034), ("m-bank5", "dp", "a", 0.757, 0.015, 0.091, 0.028),
    ("m-bank5", "dp", "m", 0.774, 0.011, 0.336, 0.047), ("m-bank5", "dp", "pfld", 0.805, 0.009, 0.193, 0.035),
    ("m-bank5", "eo", "clf", 0.807, 0.008, 0.271, 0.068), ("m-bank5", "eo", "a", 0.785, 0.011, 0.214, 0.045),
    ("m-bank5", "eo", "m", 0.800, 0.008, 0.400, 0.117), ("m-bank5", "eo", "pfld", 0.823, 0.007, 0.297, 0.084),
], columns=["dataset", "constraint", "method", "accuracy", "accuracy_sd", "violation", "violation_sd"])

#: delta of PF-LD's (epsilon, delta) guarantee in Table 2 (the paper's; M is epsilon-LDP)
PFLD_DELTA = 1e-5

ROW_KEYS = ("method", "constraint", "fold", "accuracy", "violation", "epsilon")


@dataclass(frozen=True)
class PfldSettings:
    """Run lengths of one profile (see the module docstring). ``subsample``: rows kept
    (stratified by group x label) before the folds, None = all."""

    folds: int = 5
    epochs: int = 10
    batch_size: int = 256
    subsample: int | None = None
    reductions_max_iter: int = 50
    sweep_seeds: int = 2
    seed: int = 0
    pld_discretization: float | None = None  # PLD value_discretization_interval; None: the core's


def _settings_key(settings: PfldSettings) -> dict[str, Any]:
    """The settings as a cache-key dict (a None ``pld_discretization`` left out, so keys of
    runs made before that field existed stay valid)."""
    key = asdict(settings)
    if key["pld_discretization"] is None:
        del key["pld_discretization"]
    return key


def with_profile(profile: str, **overrides: Any) -> PfldSettings:
    """The paper's protocol ("full") or a CI-sized one ("quick": 300 rows, 2 folds,
    2 epochs -- PF-LD releases nothing in its first epoch, so 1 epoch would be CLF --,
    batches of 64, 3 reductions iterations, 1 sweep seed, and a 10x coarser PLD grid,
    which makes the noise calibration ~15x faster and sigma ~0.1% larger: still a valid
    bound, pessimistic)."""
    check_choice(profile, "profile", PROFILES)
    settings = PfldSettings() if profile == "full" else PfldSettings(
        folds=2, epochs=2, batch_size=64, subsample=300, reductions_max_iter=3, sweep_seeds=1,
        pld_discretization=1e-2)
    return replace(settings, **overrides)


# ------------------------------------------------------------------ data
def load_table_data(dataset: str, *, group_by: str | None = None, subsample: int | None = None,
                    seed: int = 0) -> GroupedDataset:
    """A Table 2 data set (``income``/``adult``, ``compas``, ...), optionally subsampled
    (stratified by group x label, seeded)."""
    check_choice(dataset, "dataset", tuple(DATASETS))
    data = datasets.load(DATASETS[dataset], **({} if group_by is None else {"by": group_by}))
    if subsample is not None and check_positive_int(subsample, "subsample") < len(data):
        from sklearn.model_selection import train_test_split

        strata = data.group.numpy() * data.n_classes + data.y.numpy()
        keep, _ = train_test_split(np.arange(len(data)), train_size=subsample, stratify=strata,
                                   random_state=check_seed(seed))
        data = data.subset(np.sort(keep))
    return data


def cv_folds(data: GroupedDataset, folds: int, *, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``StratifiedKFold(folds, shuffle=True, random_state=seed)`` on group x label strata."""
    from sklearn.model_selection import StratifiedKFold

    check_positive_int(folds, "folds")
    if folds < 2:
        raise ValueError(f"folds must be >= 2, got {folds}")
    strata = data.group.numpy() * data.n_classes + data.y.numpy()
    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=check_seed(seed))
    return [(train, test) for train, test in splitter.split(np.zeros(len(data)), strata)]


# ------------------------------------------------------------------ one run
def _lagrangian_config(method: str, settings: PfldSettings, *, epsilon: float, seed: int, n_train: int,
                       **overrides: Any):
    from dpfair_analysis.privacy.pfld_accounting import PFLD_ACCOUNTING
    from dpfair_analysis.training.lagrangian import LagrangianConfig

    if settings.pld_discretization is not None:
        overrides.setdefault("accounting", replace(PFLD_ACCOUNTING,
                                                   value_discretization_interval=settings.pld_discretization))
    if method == "pfld-shared-batch":
        overrides.setdefault("public_batch", "shared")
    return LagrangianConfig(method="fld" if method == "fld" else "pfld", epochs=settings.epochs,
                            batch_size=min(settings.batch_size, n_train), epsilon=epsilon,
                            paper_exact=method == "pfld-paper", seed=seed, **overrides)


def run_pfld(train: GroupedDataset, kind: str, config, *, test: GroupedDataset | None = None,
             hidden: Sequence[int] = (64, 64), progress: bool = False):
    """One F-LD / PF-LD run, the recipe of both ``dpfair train`` and Table 2: constraint ``kind``
    on the data's groups, a ReLU MLP (``hidden``, seeded by ``config.seed``), and -- for PF-LD
    without a fixed ``noise_multiplier`` -- the calibrated sigma_p of this run shape from the
    cache (:func:`calibrated_sigma`; the same sigma ``train_lagrangian`` would calibrate).
    Warnings (a design whose privacy is not established) pass through to the caller."""
    from dpfair_analysis.models import build_model
    from dpfair_analysis.training.lagrangian import train_lagrangian

    constraint = make_constraint(kind, n_groups=train.n_groups, n_classes=train.n_classes,
                                 group_names=train.group_names)
    if config.method == "pfld" and config.noise_multiplier is None:
        config = replace(config, noise_multiplier=calibrated_sigma(config, n=len(train)))
    model = build_model("mlp", input_shape=tuple(train.X.shape[1:]), n_classes=train.n_classes, seed=config.seed,
                        hidden=tuple(hidden))
    return train_lagrangian(model, train, constraint, config, test_data=test, progress=progress)


def m_correction(n_groups: int) -> str:
    """M's constraint-bound correction for ``n_groups`` groups: ``"scale"`` (the flip-rate correction of
    :func:`~dpfair_analysis.training.baselines.corrected_difference_bound`) where it is derived, for 2 groups;
    ``"none"`` (the bound on the privatised groups as is) for M-Bank3 and M-Bank5, where the paper gives no
    correction and we derived none (the table's ``m_correction`` column says which ran)."""
    return "scale" if n_groups == 2 else "none"


def run_method(method: str, kind: str, train: GroupedDataset, test: GroupedDataset, *, settings: PfldSettings,
               epsilon: float = 1.0, seed: int = 0, h_norm_rows: int = 0, record_divergence: bool = False,
               **overrides: Any) -> dict[str, Any]:
    """Train one method under one constraint; the test-set row (plus train metrics and
    diagnostics). ``overrides`` go to :class:`LagrangianConfig` for (P)F-LD (lr, clip_primal,
    clip_dual, lambda_max, missing_rate, ...) and to the baseline's fit function for CLF, Z, A
    and M (lr; covariance_fraction; difference_bound, ...): a tuned configuration. ``h_norm_rows`` > 0: also the per-group share of
    per-sample h-gradient norms (final model, first that many training rows) above
    C_p (Fig. 3). ``record_divergence`` (the sweeps): a (P)F-LD run whose parameters
    stop being finite is a row with NaN accuracy and violation and its step in
    ``diverged_at_step``, not an error -- with h = the loss (accuracy parity), a
    Lagrangian whose noisy signs turn negative maximises the population loss, which is
    unbounded, and the sweeps show where that happens."""
    check_choice(method, "method", ALL_METHODS)
    start = time.perf_counter()
    row: dict[str, Any] = {"method": method, "constraint": kind}
    if method in ("clf", "z", "a", "m"):
        from dpfair_analysis.training.baselines import fit_baseline

        constraint = make_constraint(kind, n_groups=train.n_groups, n_classes=train.n_classes,
                                     group_names=train.group_names)
        options: dict[str, Any] = {}
        if method == "clf":
            options = {"epochs": settings.epochs, "batch_size": min(settings.batch_size, len(train))}
        elif method in ("a", "m"):
            options = {"max_iter": settings.reductions_max_iter}
        if method == "m":
            options["correction"] = m_correction(train.n_groups)
        options.update(overrides)
        result = fit_baseline(method, train, constraint, test=test, epsilon=epsilon, seed=seed, **options)
        metrics = result.metrics
        row.update(accuracy=metrics["test_accuracy"], violation=metrics["test_violation"],
                   train_accuracy=metrics["train_accuracy"], train_violation=metrics["train_violation"],
                   epsilon=epsilon if method == "m" else None, privacy="epsilon-LDP on A (randomized response)"
                   if method == "m" else "none")
        if method == "m":
            row["m_correction"] = options["correction"]
    else:
        from dpfair_analysis.privacy.sensitivity import PrivacyNotEstablishedWarning
        from dpfair_analysis.training.loop import TrainingDiverged

        config = _lagrangian_config(method, settings, epsilon=epsilon, seed=seed, n_train=len(train),
                                    **overrides)
        row.update(clip_primal=config.clip_primal, clip_dual=config.clip_dual, missing_rate=config.missing_rate)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PrivacyNotEstablishedWarning)
            try:
                result = run_pfld(train, kind, config, test=test)
            except TrainingDiverged as error:
                if not record_divergence:
                    raise
                row.update(accuracy=math.nan, violation=math.nan, diverged_at_step=error.step)
            else:
                final, final_train = result.final("test"), result.final("train")
                row.update(accuracy=final["accuracy"], violation=final["violation"],
                           train_accuracy=final_train["accuracy"], train_violation=final_train["violation"],
                           epsilon=result.epsilon, privacy="none" if method == "fld" else (
                               "(eps, delta)-DP on A (established)" if result.privacy_established
                               else f"NOT established ({METHOD_LABELS[method]})"),
                           sigma_p=result.noise_multipliers["primal"], lambda_max_reached=float(result.lambdas.max()))
                if "frac_clipped" in result.steps.columns:
                    row["step_frac_clipped"] = float(result.steps["frac_clipped"].mean())
                if h_norm_rows:
                    row.update(_fraction_above(result.model, train, result.constraint, config.clip_primal,
                                               h_norm_rows))
    row["seconds"] = time.perf_counter() - start
    row["requested_epsilon"] = epsilon
    return row


def calibrated_sigma(config, *, n: int) -> float:
    """sigma_p of :func:`~dpfair_analysis.privacy.pfld_accounting.calibrate_pfld_noise` for this
    run shape (n, batch size, epochs, epsilon, delta, ratios, accounting, variant), cached
    in memory and in the run cache: the PLD calibration takes about a minute and is the
    same for every fold and constraint. Passing it as ``noise_multiplier`` with the same
    ratios gives exactly the calibrated run; epsilon is still computed from the ledger."""
    from dpfair_analysis.experiments.cache import default_cache_dir

    args = (n, config.batch_size, config.epochs, config.epsilon, config.delta, config.dual_noise_ratio,
            config.count_noise_ratio, config.accounting, config.paper_exact)
    if args not in _SIGMAS:
        key = config_key("pfld-calibration", *args)
        _SIGMAS[args] = RunCache(default_cache_dir()).get_or_compute(key, lambda: _calibrate(*args))
    return _SIGMAS[args]


_SIGMAS: dict[tuple, float] = {}


def _calibrate(n, batch_size, epochs, epsilon, delta, dual_ratio, count_ratio, accounting, paper_exact) -> float:
    from dpfair_analysis.privacy.pfld_accounting import calibrate_pfld_noise

    return float(calibrate_pfld_noise(n=n, batch_size=batch_size, epochs=epochs, epsilon=epsilon, delta=delta,
                                      dual_noise_ratio=dual_ratio, count_noise_ratio=count_ratio,
                                      accounting=accounting, paper_exact=paper_exact)["primal"])


def _fraction_above(model, train: GroupedDataset, constraint, clip: float, rows: int) -> dict[str, float]:
    from dpfair_analysis.theory.pfld_bounds import h_gradients

    part = train.subset(np.arange(min(rows, len(train))))
    norms = h_gradients(model, part, constraint).norm(dim=1).numpy()
    out = {}
    for k, name in enumerate(train.group_names):
        sel = norms[part.group.numpy() == k]
        out[f"frac_above[{name}]"] = float((sel > clip).mean()) if len(sel) else math.nan
        out[f"median_h_grad_norm[{name}]"] = float(np.median(sel)) if len(sel) else math.nan
    return out


def _cached(cache: RunCache | None, key: str, compute):
    return (cache or RunCache(None)).get_or_compute(key, compute)


# ------------------------------------------------------------------ Table 2
def table_name(dataset: str, group_by: str | None) -> str:
    """The paper's name of a Table 2 row set: Bank grouped by ``age3`` / ``age5`` is "m-bank3" / "m-bank5"."""
    if dataset == "bank" and group_by is not None:
        from dpfair_analysis.data.bank import NAMES

        return NAMES[group_by]
    return dataset


def table2(dataset: str = "income", *, constraints: Sequence[str] = KINDS, methods: Sequence[str] = TABLE_METHODS,
           folds: int | None = None, epsilon: float = 1.0, profile: str = "full", group_by: str | None = None,
           settings: PfldSettings | None = None, cache: RunCache | None = None,
           progress: bool = False,
                  backend: Backend | None = None) -> pd.DataFrame:
    """paper 003 Table 2 for one data set: one row per (method, constraint, fold) with
    test accuracy and fairness violation (the shared metric), epsilon and diagnostics.

    The runs go through :func:`~.sweep.run_sweep` (``cache``, ``backend``)."""
    settings = settings or with_profile(profile)
    if folds is not None:
        settings = replace(settings, folds=folds)
    epsilon = check_positive(epsilon, "epsilon")
    for kind in constraints:
        check_choice(kind, "constraint", KINDS)
    for method in methods:
        check_choice(method, "method", ALL_METHODS)
    data = load_table_data(dataset, group_by=group_by, subsample=settings.subsample, seed=settings.seed)
    splits = cv_folds(data, settings.folds, seed=settings.seed)
    cells = [(kind, method, f) for kind in constraints for method in methods for f in range(len(splits))]
    runs = []
    for kind, method, f in cells:
        train, test = data.subset(splits[f][0]), data.subset(splits[f][1])
        # CLF does not depend on the constraint: one fit per fold (one key), shared by every constraint
        key_kind = "any" if method == "clf" else kind
        key = config_key("pfld-table2", dataset, group_by, _settings_key(settings), method, key_kind, f,
                         epsilon if method in PRIVATE_METHODS else None, *_variant(method))
        if method == "clf":
            compute = partial(_clf_for_every_constraint, train, test, settings, seed=settings.seed + f)
        else:
            compute = partial(run_method, method, kind, train, test, settings=settings, epsilon=epsilon,
                              seed=settings.seed + f)
        runs.append(Run(key, compute))
    results = run_sweep(runs, cache=cache, backend=backend, progress=progress, desc=f"Table 2 {dataset}")
    rows = []
    for (kind, method, f), result in zip(cells, results):
        row = dict(result[kind] if method == "clf" else result)
        row.update(dataset=table_name(dataset, group_by), constraint=kind, fold=f)
        rows.append(row)
    return pd.DataFrame(rows)


def _variant(method: str) -> tuple[str, ...]:
    """Extra cache-key parts for PF-LD: runs made before its public part had its own batch
    (same key, other numbers) must not be served as the corrected method."""
    return ("public-batch:independent",) if method == "pfld" else ()


def _clf_for_every_constraint(train: GroupedDataset, test: GroupedDataset, settings: PfldSettings, *,
                              seed: int, lr: float | None = None) -> dict[str, dict[str, Any]]:
    """CLF ignores the constraint: fit once, score its predictions under dp, eo and ap (``lr``: the learning
    rate, None for :func:`~dpfair_analysis.training.baselines.fit_clf`'s default)."""
    from dpfair_analysis.training.baselines import evaluate_predictions, fit_clf

    start = time.perf_counter()
    base = make_constraint("dp", n_groups=train.n_groups, n_classes=train.n_classes)
    fitted = fit_clf(train, base, epochs=settings.epochs, batch_size=min(settings.batch_size, len(train)),
                     seed=seed, **({} if lr is None else {"lr": lr}))
    seconds = time.perf_counter() - start
    out = {}
    for kind in KINDS:
        if kind in ("dp", "eo") and train.n_classes != 2:
            continue
        constraint = make_constraint(kind, n_groups=train.n_groups, n_classes=train.n_classes)
        te = evaluate_predictions(fitted.predict(test.X), test, constraint)
        tr = evaluate_predictions(fitted.predict(train.X), train, constraint)
        out[kind] = {"method": "clf", "constraint": kind, "accuracy": te["accuracy"], "violation": te["violation"],
                     "train_accuracy": tr["accuracy"], "train_violation": tr["violation"], "epsilon": None,
                     "privacy": "none", "seconds": seconds, "requested_epsilon": None}
    return out


def summarize(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd over folds per (dataset, method, constraint)."""
    keys = [k for k in ("dataset", "constraint", "method") if k in rows.columns]
    table = rows.groupby(keys, sort=False)[["accuracy", "violation"]].agg(["mean", "std"])
    table.columns = ["accuracy", "accuracy_sd", "violation", "violation_sd"]
    return table.reset_index()


def side_by_side(rows: pd.DataFrame, dataset: str | None = None) -> pd.DataFrame:
    """Measured mean (sd) beside :data:`PAPER_TABLE2` (NaN where the paper has no cell)."""
    summary = summarize(rows)
    if "dataset" not in summary.columns:
        summary["dataset"] = dataset
    paper = PAPER_TABLE2
    summary["paper_key"] = summary["dataset"].replace({"adult": "income"})
    summary["paper_method"] = summary["method"].replace({"pfld-paper": "pfld"})
    merged = summary.merge(paper.rename(columns={c: f"paper_{c}" for c in
                                                 ("accuracy", "accuracy_sd", "violation", "violation_sd")}),
                           left_on=["paper_key", "constraint", "paper_method"],
                           right_on=["dataset", "constraint", "method"], how="left", suffixes=("", "_p"))
    columns = ["dataset", "constraint", "method", "accuracy", "accuracy_sd", "paper_accuracy", "paper_accuracy_sd",
               "violation", "violation_sd", "paper_violation", "paper_violation_sd"]
    return merged[columns]


def format_table(rows: pd.DataFrame, dataset: str | None = None) -> str:
    """Human table: per constraint and method, 'mean (sd)' measured and the paper's."""
    table = side_by_side(rows, dataset)

    def cell(m: float, s: float) -> str:
        if m != m:
            return "—"
        return f"{m:.3f} ({s:.3f})" if s == s else f"{m:.3f}"

    lines = [f"{'data':8s} {'constraint':10s} {'method':19s} {'accuracy':15s} {'paper acc':15s} "
             f"{'violation':15s} {'paper viol':15s}"]
    for _, r in table.iterrows():
        lines.append(f"{str(r['dataset']):8s} {r['constraint']:10s} {METHOD_LABELS.get(r['method'], r['method']):19s} "
                     f"{cell(r['accuracy'], r['accuracy_sd']):15s} {cell(r['paper_accuracy'], r['paper_accuracy_sd']):15s} "
                     f"{cell(r['violation'], r['violation_sd']):15s} "
                     f"{cell(r['paper_violation'], r['paper_violation_sd']):15s}")
    return "\n".join(lines)


def pfld_vs_m(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, constraint): does PF-LD beat M on accuracy or on violation (means)?"""
    s = summarize(rows)
    out = []
    for keys, part in s.groupby([c for c in ("dataset", "constraint") if c in s.columns], sort=False):
        by = part.set_index("method")
        if not {"pfld", "m"} <= set(by.index):
            continue
        keys = keys if isinstance(keys, tuple) else (keys,)
        out.append({**dict(zip([c for c in ("dataset", "constraint") if c in s.columns], keys)),
                    "pfld_accuracy": by.loc["pfld", "accuracy"], "m_accuracy": by.loc["m", "accuracy"],
                    "pfld_violation": by.loc["pfld", "violation"], "m_violation": by.loc["m", "violation"],
                    "better_accuracy": by.loc["pfld", "accuracy"] > by.loc["m", "accuracy"],
                    "better_violation": by.loc["pfld", "violation"] < by.loc["m", "violation"]})
    frame = pd.DataFrame(out)
    if len(frame):
        frame["better_either"] = frame["better_accuracy"] | frame["better_violation"]
    return frame


# ------------------------------------------------------------------ sweeps (Figures 1-5)
def _sweep(dataset: str, name: str, grid: list[dict[str, Any]], *, kind: str, profile: str,
           settings: PfldSettings | None, cache: RunCache | None, progress: bool, seeds: int | None,
           backend: Backend | None = None, h_norm_rows: int = 0,
           bases: dict[tuple[str, int], dict[str, Any]] | None = None) -> pd.DataFrame:
    """The runs of one figure: every point of ``grid`` (a method, an epsilon and the swept options) on each
    seed's 80/20 split. ``bases`` (:func:`tuned_bases`): per (method, seed) a tuned configuration the point
    starts from (the swept option overrides it); rows then carry ``base`` (the configuration in words)."""
    settings = settings or with_profile(profile)
    n_seeds = seeds if seeds is not None else settings.sweep_seeds
    data = load_table_data(dataset, subsample=settings.subsample, seed=settings.seed)
    cells = [(dict(point), s) for point in grid for s in range(n_seeds)]
    runs = []
    for point, s in cells:
        train, test = data.split(0.2, seed=settings.seed + s, stratify="group_label")
        options = {k: v for k, v in point.items() if k not in ("method", "epsilon")}
        method, epsilon = point["method"], point["epsilon"]
        run_settings, base = settings, {}
        if bases is not None:
            run_settings, base = _configured(bases[(method, s)], settings)
        key = config_key("pfld-sweep", dataset, _settings_key(settings), method, kind, epsilon, s, options,
                         h_norm_rows, *_variant(method),
                         *(() if bases is None else (("base", bases[(method, s)]),)))
        runs.append(Run(key, partial(run_method, method, kind, train, test, settings=run_settings, epsilon=epsilon,
                                     seed=settings.seed + s, h_norm_rows=h_norm_rows if method != "m" else 0,
                                     record_divergence=True, **{**base, **options})))
    results = run_sweep(runs, cache=cache, backend=backend, progress=progress, desc=f"{name} {dataset}")
    rows = []
    for (point, s), result in zip(cells, results):
        options = {k: v for k, v in point.items() if k not in ("method", "epsilon")}
        extra = {} if bases is None else {"base": describe_configuration(bases[(point["method"], s)])}
        rows.append({**result, "dataset": dataset, "sweep": name, "seed": s, "requested_epsilon": point["epsilon"],
                     **options, **extra})
    return pd.DataFrame(rows)


def sweep_tuning(dataset: str = "bank", *, kind: str = "dp", methods: Sequence[str] = ("pfld",),
                 profile: str = "full", settings: PfldSettings | None = None, seeds: int | None = None,
                 grids: dict[str, TuningGrid] | None = None, epsilon: float = 1.0,
                 validation_fraction: float | None = None, cache: RunCache | None = None,
                 progress: bool = False, backend: Backend | None = None) -> pd.DataFrame:
    """The reproduction protocol for a figure's sweeps: for each seed's 80/20 split of the sweeps, every
    configuration of each method's budget at ``epsilon`` trains on the split's training rows minus
    ``validation_fraction`` of them (stratified by group x label) and is scored on those (:func:`tuning_score`);
    the test rows of the split are never read.

    Parameters
    ----------
    dataset : str
        The figure's data set.
    kind : str
        Its constraint (dp, eo, ap).
    methods : sequence of str
        The methods whose configuration is chosen (PF-LD; M for Figure 1).
    profile, settings, seeds
        As for :func:`epsilon_sweep` (the same splits as the sweeps).
    grids : dict of str to TuningGrid, optional
        The budgets (default :func:`table2_grids`).
    epsilon : float
        The privacy budget the configurations are tuned at.
    validation_fraction : float, optional
        Default :data:`TABLE2_VALIDATION_FRACTION`.
    cache, progress, backend
        As for the sweeps.

    Returns
    -------
    pandas.DataFrame
        One row per (method, seed, configuration) with the validation accuracy, violation, score and
        ``chosen`` (:func:`tuned_bases` turns the chosen ones into the sweeps' ``bases``).
    """
    from dpfair_analysis.experiments.tuning import describe_configuration, select

    settings = settings or with_profile(profile)
    grids = grids or table2_grids(profile)
    validation_fraction = TABLE2_VALIDATION_FRACTION if validation_fraction is None else validation_fraction
    n_seeds = seeds if seeds is not None else settings.sweep_seeds
    data = load_table_data(dataset, subsample=settings.subsample, seed=settings.seed)
    cells, runs = [], []
    for s in range(n_seeds):
        train, _ = data.split(0.2, seed=settings.seed + s, stratify="group_label")
        fit, held_out = train.split(validation_fraction, seed=settings.seed + s, stratify="group_label")
        for method in methods:
            for i, configuration in enumerate(grids[method].configurations()):
                run_settings, overrides = _configured(configuration, settings)
                key = config_key("pfld-sweep-tuning", dataset, _settings_key(settings), method, kind, epsilon, s,
                                 configuration, validation_fraction, *_variant(method))
                runs.append(Run(key, partial(run_method, method, kind, fit, held_out, settings=run_settings,
                                             epsilon=epsilon, seed=settings.seed + s, record_divergence=True,
                                             **overrides)))
                cells.append((method, s, i, configuration))
    results = run_sweep(runs, cache=cache, backend=backend, progress=progress, desc=f"sweep tuning {dataset} {kind}")
    rows = pd.DataFrame([{"dataset": dataset, "constraint": kind, "method": method, "seed": s,
                          "configuration_index": i, "configuration": describe_configuration(configuration),
                          "accuracy": r["accuracy"], "violation": r["violation"],
                          "score": tuning_score(method, r["accuracy"], r["violation"])}
                         for (method, s, i, configuration), r in zip(cells, results)])
    picked = select(rows, by=("method", "seed"))
    rows["chosen"] = rows.set_index(["method", "seed", "configuration_index"]).index.isin(
        picked.set_index(["method", "seed", "configuration_index"]).index)
    return rows


def tuned_bases(tuning: pd.DataFrame, grids: dict[str, TuningGrid]) -> dict[tuple[str, int], dict[str, Any]]:
    """(method, seed) -> the configuration :func:`sweep_tuning` chose: the ``bases`` of the sweeps."""
    chosen = tuning[tuning["chosen"]]
    return {(r.method, int(r.seed)): grids[r.method].configurations()[int(r.configuration_index)]
            for r in chosen.itertuples()}


def epsilon_sweep(dataset: str = "compas", *, kind: str = "dp", epsilons: Sequence[float] = (0.1, 0.5, 1.0, 2.0, 5.0),
                  methods: Sequence[str] = ("pfld", "m"), profile: str = "full", settings: PfldSettings | None = None,
                  seeds: int | None = None, cache: RunCache | None = None, progress: bool = False,
                  backend: Backend | None = None,
                  bases: dict[tuple[str, int], dict[str, Any]] | None = None) -> pd.DataFrame:
    """Figure 1: accuracy and violation against epsilon, PF-LD and M (tidy rows). ``bases``: per (method,
    seed) the tuned configuration every point starts from (:func:`tuned_bases`; None: the printed one)."""
    grid = [{"method": m, "epsilon": float(e)} for m in methods for e in epsilons]
    return _sweep(dataset, "fig1_epsilon", grid, kind=kind, profile=profile, settings=settings, cache=cache,
                  progress=progress, seeds=seeds, backend=backend, bases=bases)


def clip_sweep(dataset: str = "compas", *, kind: str = "dp", clips: Sequence[float] = (0.1, 1.0, 10.0, 20.0, 50.0),
               epsilons: Sequence[float] = (0.5, 1.0, 2.0), profile: str = "full",
               settings: PfldSettings | None = None, seeds: int | None = None, cache: RunCache | None = None,
               progress: bool = False, h_norm_rows: int = 1000,
               backend: Backend | None = None,
               bases: dict[tuple[str, int], dict[str, Any]] | None = None) -> pd.DataFrame:
    """Figures 2 and 3: PF-LD at each primal clipping bound C_p and epsilon; rows carry
    the per-group share of per-sample h-gradient norms above C_p (final model) and the
    share clipped during training (``step_frac_clipped``). ``bases``: as for :func:`epsilon_sweep`."""
    grid = [{"method": "pfld", "epsilon": float(e), "clip_primal": float(c)} for c in clips for e in epsilons]
    return _sweep(dataset, "fig2_clip_primal", grid, kind=kind, profile=profile, settings=settings, cache=cache,
                  progress=progress, seeds=seeds, backend=backend, h_norm_rows=h_norm_rows, bases=bases)


def dual_clip_sweep(dataset: str = "compas", *, kind: str = "ap", clips: Sequence[float] = (0.1, 1.0, 5.0, 100.0),
                    epsilons: Sequence[float] = (0.5, 1.0, 2.0), profile: str = "full",
                    settings: PfldSettings | None = None, seeds: int | None = None, cache: RunCache | None = None,
                    progress: bool = False,
                  backend: Backend | None = None,
                    bases: dict[tuple[str, int], dict[str, Any]] | None = None) -> pd.DataFrame:
    """Figure 4: PF-LD at each dual clipping bound C_d. Default constraint ap: for dp and eo
    h is a probability (|h| <= 1), so C_d >= 1 never clips and only scales the noise. ``bases``: as for
    :func:`epsilon_sweep`."""
    grid = [{"method": "pfld", "epsilon": float(e), "clip_dual": float(c)} for c in clips for e in epsilons]
    return _sweep(dataset, "fig4_clip_dual", grid, kind=kind, profile=profile, settings=settings, cache=cache,
                  progress=progress, seeds=seeds, backend=backend, bases=bases)


def missing_sweep(dataset: str = "compas", *, kind: str = "dp", missing_rates: Sequence[float] = (0.6, 0.4, 0.2, 0.0),
                  epsilons: Sequence[float] = (0.5, 1.0, 2.0), profile: str = "full",
                  settings: PfldSettings | None = None, seeds: int | None = None, cache: RunCache | None = None,
                  progress: bool = False,
                  backend: Backend | None = None,
                  bases: dict[tuple[str, int], dict[str, Any]] | None = None) -> pd.DataFrame:
    """Figure 5: PF-LD when a fraction of training rows does not report its group
    (missing_rate; the paper's r = 1 - missing_rate). Evaluation uses every test row. ``bases``: as for
    :func:`epsilon_sweep`."""
    grid = [{"method": "pfld", "epsilon": float(e), "missing_rate": float(r)} for r in missing_rates for e in epsilons]
    return _sweep(dataset, "fig5_missing", grid, kind=kind, profile=profile, settings=settings, cache=cache,
                  progress=progress, seeds=seeds, backend=backend, bases=bases)


def sweep_summary(rows: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean and sd of accuracy and violation over the seeds that did not diverge, grouped by ``by``;
    ``runs`` and ``diverged`` count the seeds."""
    rows = rows.assign(diverged=rows["diverged_at_step"].notna() if "diverged_at_step" in rows.columns else False)
    grouped = rows.groupby(list(by), sort=True)
    table = grouped[["accuracy", "violation"]].agg(["mean", "std"])
    table.columns = ["accuracy", "accuracy_sd", "violation", "violation_sd"]
    table["runs"] = grouped.size()
    table["diverged"] = grouped["diverged"].sum().astype(int)
    return table.reset_index()



def bias_variance_curve(dataset: str = "compas", *, kind: str = "dp",
                        clips: Sequence[float] = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0),
                        epsilon: float = 1.0, profile: str = "full", settings: PfldSettings | None = None,
                        draws: int = 200, cache: RunCache | None = None) -> pd.DataFrame:
    """Theorem 6 (paper 003) against C_p on real per-sample gradients (the Fig. 4 analysis).

    Trains PF-LD once (seed 0 split), takes one batch of ``batch_size`` training rows and
    the final multipliers (all 1 if PF-LD ended with lambda = 0), and per C_p reports the
    paper's printed bound (noise sigma_p Delta_p with Eq. 7's Delta_p), its bias and
    noise parts, and a Monte Carlo of E||G - G~|| with that noise
    (:mod:`dpfair_analysis.theory.pfld_bounds`).
    """
    from dpfair_analysis.privacy.sensitivity import paper_primal_sensitivity
    from dpfair_analysis.theory.pfld_bounds import (h_gradients, paper_primal_error_bound,
                                                    primal_error_monte_carlo)

    settings = settings or with_profile(profile)
    key = config_key("pfld-bias-variance", dataset, _settings_key(settings), kind, list(clips), epsilon, draws)

    def compute() -> pd.DataFrame:
        from dpfair_analysis.models import build_model
        from dpfair_analysis.training.lagrangian import train_lagrangian

        data = load_table_data(dataset, subsample=settings.subsample, seed=settings.seed)
        train, test = data.split(0.2, seed=settings.seed, stratify="group_label")
        constraint = make_constraint(kind, n_groups=data.n_groups, n_classes=data.n_classes)
        config = _lagrangian_config("pfld", settings, epsilon=epsilon, seed=settings.seed, n_train=len(train))
        config = replace(config, noise_multiplier=calibrated_sigma(config, n=len(train)))
        model = build_model("mlp", input_shape=tuple(train.X.shape[1:]), n_classes=data.n_classes, seed=settings.seed)
        result = train_lagrangian(model, train, constraint, config, test_data=test, progress=False)
        batch = train.subset(np.arange(min(config.batch_size, len(train))))
        grads = h_gradients(result.model, batch, constraint)
        masks = constraint.group_masks(batch.y, batch.group)
        norms = grads.norm(dim=1).numpy()
        by_term = [norms[masks[:, i].numpy()] for i in range(constraint.n_terms)]
        lambdas = [float(v) for v in result.lambdas]
        if not any(lambdas):
            lambdas = [1.0] * len(lambdas)
        sigma = config.noise_multiplier
        rows = []
        for c in clips:
            std = sigma * paper_primal_sensitivity([len(v) for v in by_term], clip=c, lambda_max=config.lambda_max)
            bound = paper_primal_error_bound(by_term, lambdas, clip=c, sigma=sigma, lambda_max=config.lambda_max,
                                             n_params=grads.shape[1])
            bias = bound - math.sqrt(grads.shape[1]) * std
            mc, se = primal_error_monte_carlo(grads, masks, lambdas, clip=c, noise_std=std, draws=draws,
                                              seed=settings.seed)
            rows.append({"clip": c, "paper_bound": bound, "bias_term": bias, "noise_term": bound - bias,
                         "monte_carlo": mc, "monte_carlo_se": se, "sigma_p": sigma, "noise_std": std,
                         "n_params": int(grads.shape[1]), "lambdas": str(lambdas),
                         "median_h_grad_norm": float(np.median(norms))})
        return pd.DataFrame(rows)

    return _cached(cache, key, compute)


# ------------------------------------------------------------------ figures of the notebook
def table2_figure(rows: pd.DataFrame, name: str):
    """Table 2 of one data set as a figure (:func:`dpfair_analysis.plotting.plot_table2`)
    and the side-by-side table behind it (with a ``label`` column naming each method).

    Returns ``(figure, side)``.
    """
    from dpfair_analysis.plotting import plot_table2

    side = side_by_side(rows)
    side["label"] = side["method"].map(METHOD_LABELS)
    fig = plot_table2(rows.assign(label=rows["method"].map(METHOD_LABELS)), side, name=name)
    return fig, side


def fraction_above_table(rows: pd.DataFrame, *, epsilon: float = 1.0) -> pd.DataFrame:
    """Figure 3's table from :func:`clip_sweep` rows at one requested ``epsilon``: one row per
    (C_p, seed, group) with accuracy, violation, the share clipped during training and
    ``fraction_above``, the group's share of per-sample ‖∇h‖ above C_p on the final model."""
    above = [c for c in rows.columns if c.startswith("frac_above[")]
    if not above:
        raise ValueError("rows have no frac_above[<group>] columns: pass clip_sweep rows (h_norm_rows > 0)")
    table = rows[rows["requested_epsilon"] == epsilon].melt(
        id_vars=["clip_primal", "seed", "accuracy", "violation", "step_frac_clipped"], value_vars=above,
        var_name="group", value_name="fraction_above")
    table["group"] = table["group"].str.slice(len("frac_above["), -1)
    return table


# ------------------------------------------------------------------ Table 2 under the reproduction protocol
#: PF-LD: paper 003 prints epsilon, delta, C_p = 10 and C_d = 5 (Sec. 8) and "have not performed a systematic
#: model tuning"; learning rate, epochs and lambda_max are the toolkit's defaults. Two values each, the half
#: fraction (16 configurations): the printed configuration, every pair of changes and every four changes. The
#: second values: a larger step and fewer steps (at a fixed epsilon fewer steps carry less noise each), C_p and
#: C_d cut to 1 (C_d = 1 is the range of h in [0, 1] for dp and eo: C_d = 5 only scales the dual noise), and a
#: lower cap on the multipliers (the primal noise scales with lambda_max)
PFLD_GRID = TuningGrid({"lr": (0.05, 0.2), "epochs": (10, 5), "clip_primal": (10.0, 1.0), "clip_dual": (5.0, 1.0),
                        "lambda_max": (2.0, 0.5)},
                       printed={"lr": 0.05, "epochs": 10, "clip_primal": 10.0, "clip_dual": 5.0, "lambda_max": 2.0},
                       design="half", note="C_p, C_d printed; lr, epochs, lambda_max the toolkit's defaults")
#: CLF: the MLP's learning rate and epochs, 16 configurations (the same budget as PF-LD)
CLF_GRID = TuningGrid({"lr": (0.05, 0.01, 0.1, 0.2), "epochs": (10, 5, 20, 40)}, printed={"lr": 0.05, "epochs": 10},
                      note="nothing printed; the toolkit's defaults first")
#: A and M: the reductions' constraint bound gamma, 16 values (the same budget), the toolkit's 0.01 first
GAMMA_GRID = TuningGrid({"difference_bound": (0.01, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.015, 0.02, 0.03, 0.05,
                                              0.075, 0.1, 0.15, 0.2, 0.3, 0.5)},
                        printed={"difference_bound": 0.01}, note="nothing printed; the toolkit's default first")
#: Z: the covariance threshold as a fraction of the unconstrained model's, 16 values (the same budget)
Z_GRID = TuningGrid({"covariance_fraction": (0.1, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.075, 0.15, 0.2, 0.3, 0.4,
                                             0.5, 0.7, 0.85, 1.0)},
                    printed={"covariance_fraction": 0.1}, note="nothing printed; the toolkit's default first")
#: every Table 2 method's budget (16 configurations each)
TABLE2_GRIDS = {"clf": CLF_GRID, "z": Z_GRID, "a": GAMMA_GRID, "m": GAMMA_GRID, "pfld": PFLD_GRID}
#: share of each cross-validation training fold held out for selection (stratified by group x label)
TABLE2_VALIDATION_FRACTION = 0.2
#: a Table 2 cell (accuracy, violation) reproduces if the accuracy is at most the margin below the printed
#: one and the violation at most the margin above it
TABLE2_TOLERANCE = Tolerance(0.02, 1.0, "the paper's fold-to-fold sd, at least 0.02")
#: how each method's configuration is chosen on its validation rows
SELECTION_SCORES = {"clf": "validation accuracy (CLF is trained for accuracy only)",
                    "fair": "validation accuracy minus validation violation (every fair method alike)"}


def tuning_score(method: str, accuracy: float, violation: float) -> float:
    """The validation score a configuration is chosen by (:data:`SELECTION_SCORES`): accuracy for CLF,
    accuracy - violation for every fair method."""
    return accuracy if method == "clf" else accuracy - violation


def table2_grids(profile: str) -> dict[str, TuningGrid]:
    """:data:`TABLE2_GRIDS`, or for the quick profile each budget cut to its first two configurations."""
    check_choice(profile, "profile", PROFILES)
    return dict(TABLE2_GRIDS) if profile == "full" else {m: g.head(2) for m, g in TABLE2_GRIDS.items()}


def _configured(configuration: dict[str, Any], settings: PfldSettings) -> tuple[PfldSettings, dict[str, Any]]:
    """(settings, overrides) of a configuration: ``epochs`` counts in the full profile's 10 (the quick profile
    scales it to its own, at least 1) and goes to the settings; the rest are :func:`run_method`'s overrides."""
    overrides = dict(configuration)
    epochs = overrides.pop("epochs", None)
    if epochs is not None:
        settings = replace(settings, epochs=max(1, round(epochs * settings.epochs / PfldSettings().epochs)))
    return settings, overrides


@dataclass
class TunedTable2:
    """Table 2 of one data set under the reproduction protocol (:func:`tuned_table2`).

    ``runs``: every tuning run, one row per (constraint, method, fold, configuration) with its validation
    accuracy, violation and ``score`` and whether it was ``chosen``; ``chosen``: one row per (constraint,
    method, fold) with the chosen configuration refitted on the whole training fold and tested on the test
    fold (``accuracy``, ``violation``, ``epsilon``); ``defaults``: :func:`table2` (the printed configuration on
    the whole training folds); ``grids``: each method's budget."""

    dataset: str
    runs: pd.DataFrame
    chosen: pd.DataFrame
    defaults: pd.DataFrame
    grids: dict[str, TuningGrid]
    validation_fraction: float


def tuned_table2(dataset: str = "compas", *, constraints: Sequence[str] = KINDS, methods: Sequence[str] = TABLE_METHODS,
                 folds: int | None = None, epsilon: float = 1.0, profile: str = "full", group_by: str | None = None,
                 settings: PfldSettings | None = None, grids: dict[str, TuningGrid] | None = None,
                 validation_fraction: float = TABLE2_VALIDATION_FRACTION, cache: RunCache | None = None,
                 progress: bool = False, backend: Backend | None = None) -> TunedTable2:
    """Paper 003 Table 2 for one data set under the reproduction protocol (:mod:`.tuning`), nested in the
    cross-validation: in each fold, ``validation_fraction`` of the training fold (stratified by group x label)
    is held out; every configuration of the method's budget trains on the rest and is scored on the held-out
    rows (:func:`tuning_score`); the best is refitted on the whole training fold and tested on the test fold,
    which no choice has seen. CLF is chosen once per fold (by accuracy) and scored under every constraint.
    Every PF-LD configuration is calibrated to ``epsilon``, so the chosen one's epsilon is ``epsilon`` (M:
    epsilon-LDP); the selection itself is not private (:data:`~.tuning.SELECTION_PRIVACY`). Diverged runs are
    scored NaN and never chosen.

    Parameters
    ----------
    dataset : str
        A Table 2 data set (:data:`DATASETS`).
    group_by : str, optional
        Its grouping (Bank: ``age``, ``age3``, ``age5``; None: the loader's default).
    constraints, methods : sequence of str
        The fairness constraints (dp, eo, ap) and methods (of ``grids``).
    folds, epsilon, profile, settings
        As for :func:`table2` (its rows at the printed configuration are ``defaults``).
    grids : dict of str to TuningGrid, optional
        Each method's budget (default :func:`table2_grids` of ``profile``: 16 configurations each).
    validation_fraction : float
        Share of each training fold held out for the choice.
    cache, progress, backend
        As for :func:`table2`: every run is cached by its configuration, role and fold.

    Returns
    -------
    TunedTable2
        Every tuning run, the refitted choices, the printed configuration's table and the budgets.
    """
    from dpfair_analysis.experiments.tuning import describe_configuration, select

    settings = settings or with_profile(profile)
    if folds is not None:
        settings = replace(settings, folds=folds)
    grids = grids or table2_grids(profile)
    epsilon = check_positive(epsilon, "epsilon")
    for kind in constraints:
        check_choice(kind, "constraint", KINDS)
    for method in methods:
        check_choice(method, "method", tuple(grids))
    defaults = table2(dataset, constraints=constraints, methods=methods, epsilon=epsilon, group_by=group_by,
                      settings=settings, cache=cache, progress=progress, backend=backend)
    data = load_table_data(dataset, group_by=group_by, subsample=settings.subsample, seed=settings.seed)
    splits = cv_folds(data, settings.folds, seed=settings.seed)
    name = table_name(dataset, group_by)

    def fold_data(f: int, role: str) -> tuple[GroupedDataset, GroupedDataset]:
        train, test = data.subset(splits[f][0]), data.subset(splits[f][1])
        if role == "refit":
            return train, test
        return train.split(validation_fraction, seed=settings.seed + f, stratify="group_label")

    def make_run(method: str, kind: str, f: int, configuration: dict, role: str) -> Run:
        run_settings, overrides = _configured(configuration, settings)
        train, held_out = fold_data(f, role)
        key = config_key("pfld-tuning", dataset, group_by, _settings_key(settings), method,
                         "any" if method == "clf" else kind, f, epsilon if method in PRIVATE_METHODS else None,
                         configuration, role, validation_fraction, *_variant(method))
        if method == "clf":
            compute = partial(_clf_for_every_constraint, train, held_out, run_settings, seed=settings.seed + f,
                              lr=overrides.get("lr"))
        else:
            compute = partial(run_method, method, kind, train, held_out, settings=run_settings, epsilon=epsilon,
                              seed=settings.seed + f, record_divergence=True, **overrides)
        return Run(key, compute)

    def row_of(result: dict, method: str, kind: str) -> dict:
        return dict(result[kind]) if method == "clf" else dict(result)

    # 1. every configuration on the training fold minus its validation rows, scored on those rows
    cells = [(kind, method, f, i, configuration) for kind in constraints for method in methods
             for f in range(len(splits)) for i, configuration in enumerate(grids[method].configurations())]
    results = run_sweep([make_run(m, k, f, c, "validation") for k, m, f, _, c in cells], cache=cache,
                        backend=backend, progress=progress, desc=f"Table 2 {name}: tuning")
    runs = []
    for (kind, method, f, i, configuration), result in zip(cells, results):
        row = row_of(result, method, kind)
        runs.append({"dataset": name, "constraint": kind, "method": method, "fold": f, "configuration_index": i,
                     "configuration": describe_configuration(configuration),
                     **{f"cfg_{k}": v for k, v in configuration.items()},
                     "accuracy": row["accuracy"], "violation": row["violation"],
                     "score": tuning_score(method, row["accuracy"], row["violation"]),
                     "diverged_at_step": row.get("diverged_at_step", math.nan)})
    runs = pd.DataFrame(runs)
    picked = select(runs, by=("constraint", "method", "fold"))
    runs["chosen"] = runs.set_index(["constraint", "method", "fold", "configuration_index"]).index.isin(
        picked.set_index(["constraint", "method", "fold", "configuration_index"]).index)
    # 2. the chosen configuration refitted on the whole training fold, tested on the test fold
    configurations = {m: grids[m].configurations() for m in methods}
    chosen_cells = [(r.constraint, r.method, r.fold, int(r.configuration_index), float(r.score))
                    for r in picked.itertuples()]
    refits = run_sweep([make_run(m, k, f, configurations[m][i], "refit") for k, m, f, i, _ in chosen_cells],
                       cache=cache, backend=backend, progress=progress, desc=f"Table 2 {name}: refits")
    chosen = []
    for (kind, method, f, i, score), result in zip(chosen_cells, refits):
        row = row_of(result, method, kind)
        configuration = configurations[method][i]
        chosen.append({"dataset": name, "constraint": kind, "method": method, "fold": f, "configuration_index": i,
                       "configuration": describe_configuration(configuration),
                       **{f"cfg_{k}": v for k, v in configuration.items()},
                       "validation_score": score, "accuracy": row["accuracy"], "violation": row["violation"],
                       "epsilon": row.get("epsilon"), "diverged_at_step": row.get("diverged_at_step", math.nan)})
    return TunedTable2(dataset=name, runs=runs, chosen=pd.DataFrame(chosen), defaults=defaults,
                       grids={m: grids[m] for m in methods}, validation_fraction=validation_fraction)


def _mode_configuration(part: pd.DataFrame) -> str:
    """The configuration chosen in most folds (ties: the best mean validation score)."""
    counts = part.groupby("configuration", sort=False).agg(n=("fold", "size"), score=("validation_score", "mean"))
    return counts.sort_values(["n", "score"], ascending=False).index[0]


def tuned_side_by_side(tuned: TunedTable2, *, tolerance: Tolerance = TABLE2_TOLERANCE) -> pd.DataFrame:
    """One row per (constraint, method): the paper's accuracy / violation (sd), the printed configuration's
    (:func:`table2`, "defaults") and the tuned one's (mean, sd over folds), the signed differences from the
    paper, each measurement's verdict per cell, and the row's three-valued verdict (:mod:`.tuning`: both the
    accuracy and the violation must reproduce). Also the budget, the configuration chosen in most folds and how
    many folds chose it, the selection score and how the selection is accounted."""
    from dpfair_analysis.experiments.tuning import SELECTION_PRIVACY, cell_verdicts, row_verdicts

    tuned_summary = summarize(tuned.chosen.assign(dataset=tuned.dataset))
    default_summary = summarize(tuned.defaults.assign(dataset=tuned.dataset))
    key = tuned.dataset.replace("adult", "income")
    rows = []
    for t in tuned_summary.itertuples():
        d = default_summary[(default_summary["constraint"] == t.constraint) & (default_summary["method"] == t.method)]
        paper = PAPER_TABLE2[(PAPER_TABLE2["dataset"] == key) & (PAPER_TABLE2["constraint"] == t.constraint)
                             & (PAPER_TABLE2["method"] == t.method)]
        part = tuned.chosen[(tuned.chosen["constraint"] == t.constraint) & (tuned.chosen["method"] == t.method)]
        mode = _mode_configuration(part)
        row = {"dataset": tuned.dataset, "constraint": t.constraint, "method": t.method,
               "paper_accuracy": paper["accuracy"].iloc[0] if len(paper) else math.nan,
               "paper_accuracy_sd": paper["accuracy_sd"].iloc[0] if len(paper) else math.nan,
               "paper_violation": paper["violation"].iloc[0] if len(paper) else math.nan,
               "paper_violation_sd": paper["violation_sd"].iloc[0] if len(paper) else math.nan,
               "default_accuracy": d["accuracy"].iloc[0], "default_accuracy_sd": d["accuracy_sd"].iloc[0],
               "default_violation": d["violation"].iloc[0], "default_violation_sd": d["violation_sd"].iloc[0],
               "tuned_accuracy": t.accuracy, "tuned_accuracy_sd": t.accuracy_sd,
               "tuned_violation": t.violation, "tuned_violation_sd": t.violation_sd,
               "budget": len(tuned.grids[t.method]), "chosen_most_often": mode,
               "folds_choosing_it": int((part["configuration"] == mode).sum()), "folds": len(part),
               "selection_score": SELECTION_SCORES["clf" if t.method == "clf" else "fair"],
               "epsilon": (float(part["epsilon"].mean()) if t.method in PRIVATE_METHODS else None),
               "selection_privacy": SELECTION_PRIVACY if t.method in PRIVATE_METHODS else "non-private method"}
        rows.append(row)
    table = pd.DataFrame(rows)
    if table.empty or table["paper_accuracy"].isna().all():
        table["verdict"] = "no printed cell"
        return table
    cells = pd.concat([
        pd.DataFrame({"constraint": table["constraint"], "method": table["method"], "quantity": quantity,
                      "printed": table[f"paper_{quantity}"], "printed_sd": table[f"paper_{quantity}_sd"],
                      "direction": direction, "at_printed": table[f"default_{quantity}"],
                      "tuned": table[f"tuned_{quantity}"]})
        for quantity, direction in (("accuracy", "at_least"), ("violation", "at_most"))], ignore_index=True)
    cells = cells[cells["printed"].notna()]
    judged = cell_verdicts(cells, tolerance=tolerance)
    for quantity in ("accuracy", "violation"):
        part = judged[judged["quantity"] == quantity].set_index(["constraint", "method"])
        index = pd.MultiIndex.from_frame(table[["constraint", "method"]])
        table[f"{quantity}_margin"] = part["margin"].reindex(index).to_numpy()
        table[f"{quantity}_verdict"] = part["verdict"].reindex(index).to_numpy()
    verdicts = row_verdicts(judged, ["constraint", "method"]).set_index(["constraint", "method"])
    table["verdict"] = verdicts["verdict"].reindex(pd.MultiIndex.from_frame(table[["constraint", "method"]])) \
        .fillna("no printed cell").to_numpy()
    table["tolerance"] = tolerance.describe()
    return table


#: the keys of a tuned row in JSON (:func:`tuned_table2`'s ``chosen``)
TUNED_ROW_KEYS = ("constraint", "method", "fold", "configuration", "validation_score", "accuracy", "violation",
                  "epsilon")


def tuning_protocol(tuned: TunedTable2, *, tolerance: Tolerance = TABLE2_TOLERANCE) -> dict:
    """The protocol of a tuned table in JSON form: each method's budget, how configurations are chosen and
    on what, how the selection is accounted, and the tolerance of the verdicts."""
    from dpfair_analysis.experiments.tuning import SELECTION_PRIVACY, VERDICTS

    return {"budgets": {m: g.as_dict() for m, g in tuned.grids.items()}, "selection_score": dict(SELECTION_SCORES),
            "validation": f"{tuned.validation_fraction:g} of each training fold, stratified by group x label; the "
                          "chosen configuration is refitted on the whole training fold and tested on the test fold",
            "selection_privacy": SELECTION_PRIVACY, "tolerance": tolerance.describe(),
            "verdicts": list(VERDICTS)}


def format_tuned_table(summary: pd.DataFrame) -> str:
    """Human table of :func:`tuned_side_by_side`: per constraint and method, the paper's accuracy / violation,
    the printed configuration's, the tuned one's, and the verdict."""
    def pair(acc: float, viol: float) -> str:
        return "—" if acc != acc else f"{acc:.3f} / {viol:.3f}"

    lines = [f"{'constraint':10s} {'method':7s} {'paper':15s} {'printed cfg':15s} {'tuned':15s} {'verdict':38s} "
             "chosen in most folds"]
    for _, r in summary.iterrows():
        lines.append(f"{r['constraint']:10s} {METHOD_LABELS.get(r['method'], r['method']):7s} "
                     f"{pair(r['paper_accuracy'], r['paper_violation']):15s} "
                     f"{pair(r['default_accuracy'], r['default_violation']):15s} "
                     f"{pair(r['tuned_accuracy'], r['tuned_violation']):15s} {r['verdict']:38s} "
                     f"{r['chosen_most_often']} ({r['folds_choosing_it']}/{r['folds']})")
    return "\n".join(lines)


# ------------------------------------------------------------------ Figures 1-5: the claims, tested
def _per_value(rows: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Mean and sd over seeds of accuracy, violation and the trade-off accuracy - violation per ``by``,
    diverged runs left out (counted in ``diverged``)."""
    rows = rows.assign(tradeoff=rows["accuracy"] - rows["violation"],
                       diverged=rows["diverged_at_step"].notna() if "diverged_at_step" in rows else False)
    grouped = rows.groupby(list(by), sort=True)
    table = grouped[["accuracy", "violation", "tradeoff"]].agg(["mean", "std"])
    table.columns = [f"{a}_{b}".replace("_mean", "") for a, b in table.columns]
    table["diverged"] = grouped["diverged"].sum()
    return table.reset_index()


def _spearman(x: Sequence[float], y: Sequence[float]) -> float:
    from scipy.stats import spearmanr

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    return float(spearmanr(x[keep], y[keep]).statistic) if keep.sum() >= 3 else math.nan


def figure_claims(sweeps: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Paper 003 §8.2-8.5's statements about Figures 1-5, each tested on sweep rows (test split of each seed;
    means over seeds, diverged runs left out). ``sweeps`` maps ``"fig1"`` (:func:`epsilon_sweep`, PF-LD and M),
    ``"fig2"`` (:func:`clip_sweep`, with its Fig. 3 columns), ``"fig4"`` (:func:`dual_clip_sweep`) and ``"fig5"``
    (:func:`missing_sweep`) to their rows; absent keys are skipped. One row per claim: ``figure``, ``claim``,
    the paper's words (``statement``), ``holds`` (None where the rows cannot test it: an sd from one seed) and
    the numbers it rests on (``detail``). The tests:

    * fig1 ``violation_falls``: "the fairness violation score decreases as the privacy budget increases" --
      PF-LD's mean violation is lower at the largest epsilon than at the smallest and its Spearman correlation
      with epsilon is at most -0.5;
    * fig1 ``accuracy_slightly_decreases``: PF-LD's mean accuracy at the largest epsilon is 0 to 0.05 below the
      smallest's;
    * fig1 ``pfld_beats_m``: "in most cases PF-LD is more accurate and produces smaller violations [than M]" --
      at more than half of the epsilons, both;
    * fig1 ``pfld_more_robust``: "more robust than M ... comparing the standard deviations" -- PF-LD's sd over
      seeds, averaged over the epsilons, is below M's for accuracy and for violation;
    * fig2 ``best_cp_10_to_20``: "the best accuracy/fairness tradeoff is obtained when C_p in [10, 20]" -- at more
      than half of the epsilons the largest mean accuracy - violation is at C_p = 10 or 20;
    * fig3 ``share_above_falls``: "the percentage ... exceeding C_p is very high when C_p is small", "at large
      C_p most individual gradients are smaller" -- at epsilon 1, in every group, the share above the smallest
      C_p is at least 0.5 and above the largest below 0.5;
    * fig4 ``intermediate_cd_best``: "intermediate clipping values suggest better accuracy/fairness tradeoffs" --
      at more than half of the epsilons the best mean trade-off is at neither the smallest nor the largest C_d;
    * fig4 ``large_cd_fluctuates``: "large values of C_d introduce large fluctuation" -- at more than half of
      the epsilons the largest C_d diverged in some seed or has the largest sd of accuracy;
    * fig5 ``fewer_missing_smaller_violation``: "the model achieves smaller fairness violations as the number of
      missing values decreases" -- at more than half of the epsilons the Spearman correlation of the missing
      rate and the mean violation is positive.
    """
    claims = []

    def add(figure: str, claim: str, statement: str, holds: bool | None, detail: str) -> None:
        claims.append({"figure": figure, "claim": claim, "statement": statement,
                       "holds": None if holds is None else bool(holds), "detail": detail})

    if "fig1" in sweeps:
        table = _per_value(sweeps["fig1"], ["method", "requested_epsilon"])
        pfld = table[table["method"] == "pfld"].sort_values("requested_epsilon")
        eps, viol, acc = pfld["requested_epsilon"], pfld["violation"].to_numpy(), pfld["accuracy"].to_numpy()
        rho = _spearman(eps, viol)
        add("1", "violation_falls", "the fairness violation score decreases as the privacy budget increases",
            viol[-1] < viol[0] and rho <= -0.5,
            f"PF-LD violation {', '.join(f'{v:.3f}' for v in viol)} at epsilon "
            f"{', '.join(f'{e:g}' for e in eps)}; Spearman {rho:.2f}")
        drop = acc[-1] - acc[0]
        add("1", "accuracy_slightly_decreases", "the model accuracy slightly decreases as epsilon increases",
            -0.05 <= drop <= 0, f"PF-LD accuracy {acc[0]:.3f} -> {acc[-1]:.3f} ({drop:+.3f})")
        m = table[table["method"] == "m"]
        both = pfld.merge(m, on="requested_epsilon", how="inner", suffixes=("", "_m"))
        if len(both):
            wins = int(((both["accuracy"] >= both["accuracy_m"]) & (both["violation"] <= both["violation_m"])).sum())
            add("1", "pfld_beats_m", "in most cases PF-LD is more accurate and produces smaller fairness violations "
                "than M", wins > len(both) / 2, f"PF-LD ahead on both at {wins} of {len(both)} epsilons")
            sd = {q: (both[f"{q}_std"].mean(), both[f"{q}_std_m"].mean()) for q in ("accuracy", "violation")}
            testable = all(math.isfinite(v) for pair in sd.values() for v in pair)  # one seed: no sd
            add("1", "pfld_more_robust", "PF-LD produces models that are more robust than M's (smaller sd)",
                all(a < b for a, b in sd.values()) if testable else None,
                "; ".join(f"mean sd of {q}: PF-LD {a:.3f}, M {b:.3f}" for q, (a, b) in sd.items()))
    if "fig2" in sweeps:
        table = _per_value(sweeps["fig2"], ["requested_epsilon", "clip_primal"])
        best = table.loc[table.groupby("requested_epsilon")["tradeoff"].idxmax()]
        hits = int(best["clip_primal"].isin([10.0, 20.0]).sum())
        add("2", "best_cp_10_to_20", "the best accuracy/fairness tradeoff is obtained when C_p is in [10, 20]",
            hits > len(best) / 2, "best C_p by accuracy - violation at epsilon "
            + ", ".join(f"{r.requested_epsilon:g}: {r.clip_primal:g}" for r in best.itertuples()))
        above = [c for c in sweeps["fig2"].columns if c.startswith("frac_above[")]
        at_one = sweeps["fig2"][sweeps["fig2"]["requested_epsilon"] == 1.0]
        if above and len(at_one):
            shares = at_one.groupby("clip_primal")[above].mean().sort_index()
            low, high = shares.iloc[0], shares.iloc[-1]
            add("3", "share_above_falls", "the share of group-gradient norms above C_p is very high for small C_p and "
                "most are below C_p for large C_p", bool((low >= 0.5).all() and (high < 0.5).all()),
                f"share above C_p = {shares.index[0]:g}: " + ", ".join(f"{v:.2f}" for v in low)
                + f"; above C_p = {shares.index[-1]:g}: " + ", ".join(f"{v:.2f}" for v in high))
    if "fig4" in sweeps:
        table = _per_value(sweeps["fig4"], ["requested_epsilon", "clip_dual"])
        clips = sorted(table["clip_dual"].unique())
        inner, fluctuating, details = 0, 0, []
        for epsilon, part in table.groupby("requested_epsilon"):
            part = part.set_index("clip_dual").reindex(clips)
            best = part["tradeoff"].idxmax() if part["tradeoff"].notna().any() else math.nan
            inner += best not in (clips[0], clips[-1])
            largest = part.loc[clips[-1]]
            fluctuating += bool(largest["diverged"] > 0 or largest["accuracy_std"] >= part["accuracy_std"].max())
            testable = bool(table["accuracy_std"].notna().any() or (table["diverged"] > 0).any())
            details.append(f"epsilon {epsilon:g}: best C_d {best:g}, C_d = {clips[-1]:g} diverged "
                           f"{int(largest['diverged'])}, accuracy sd {largest['accuracy_std']:.3f}")
        n = table["requested_epsilon"].nunique()
        add("4", "intermediate_cd_best", "intermediate clipping values C_d suggest better accuracy/fairness "
            "tradeoffs", inner > n / 2, "; ".join(details))
        add("4", "large_cd_fluctuates", "large values of C_d introduce large fluctuation to the model accuracy",
            fluctuating > n / 2 if testable else None, "; ".join(details))
    if "fig5" in sweeps:
        table = _per_value(sweeps["fig5"], ["requested_epsilon", "missing_rate"])
        rhos = {e: _spearman(p["missing_rate"], p["violation"]) for e, p in table.groupby("requested_epsilon")}
        add("5", "fewer_missing_smaller_violation", "the model achieves smaller fairness violations as the number "
            "of missing values decreases", sum(r > 0 for r in rhos.values()) > len(rhos) / 2,
            "Spearman(missing rate, violation) at epsilon " + ", ".join(f"{e:g}: {r:.2f}" for e, r in rhos.items()))
    return pd.DataFrame(claims, columns=["figure", "claim", "statement", "holds", "detail"])


def figure_verdicts(printed: pd.DataFrame, tuned: pd.DataFrame) -> pd.DataFrame:
    """:func:`figure_claims` at the printed configuration beside the same claims on sweeps started from the
    tuned configurations (:func:`tuned_bases`), with the three-valued verdict of :mod:`.tuning` per claim."""
    from dpfair_analysis.experiments.tuning import three_valued

    both = printed.merge(tuned[["figure", "claim", "holds", "detail"]], on=["figure", "claim"], how="left",
                         suffixes=("_printed", "_tuned"))

    def verdict(a, b) -> str:
        a, b = (None if v is None or v != v else bool(v) for v in (a, b))
        return "not tested (one seed)" if a is None and b is None else three_valued(a, bool(b))

    both["verdict"] = [verdict(a, b) for a, b in zip(both["holds_printed"], both["holds_tuned"])]
    return both
