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
import torch

from dpfair_analysis import data as datasets
from dpfair_analysis.data._tabular import scale
from dpfair_analysis.data.bank import NAMES
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.experiments.cache import RunCache, RunRecords, config_key, default_cache_dir
from dpfair_analysis.experiments.sweep import Backend, Run, run_sweep
from dpfair_analysis.experiments.tuning import describe_configuration
from dpfair_analysis.fairness.constraints import KINDS, make_constraint
from dpfair_analysis.models import build_model
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
#: paper 003 Sec. 8: features at "zero mean and unit variance" -- fitted here on the rows each run trains on
#: (:func:`scaled_on_train`), never on the test fold or the validation rows.
TABLE_SCALING = "zscore"


def load_table_data(dataset: str, *, group_by: str | None = None, subsample: int | None = None,
                    seed: int = 0) -> GroupedDataset:
    """A Table 2 data set (``income``/``adult``, ``compas``, ...) with its columns unscaled (every split of it
    goes through :func:`scaled_on_train`), optionally subsampled (stratified by group x label, seeded)."""
    check_choice(dataset, "dataset", tuple(DATASETS))
    data = datasets.load(DATASETS[dataset], scaling="none", **({} if group_by is None else {"by": group_by}))
    if subsample is not None and check_positive_int(subsample, "subsample") < len(data):
        from sklearn.model_selection import train_test_split

        strata = data.group.numpy() * data.n_classes + data.y.numpy()
        keep, _ = train_test_split(np.arange(len(data)), train_size=subsample, stratify=strata,
                                   random_state=check_seed(seed))
        data = data.subset(np.sort(keep))
    return data


def scaled_on_train(train: GroupedDataset, held_out: GroupedDataset) -> tuple[GroupedDataset, GroupedDataset]:
    """``train`` and ``held_out`` (a test fold, or validation rows) with every column scaled by
    :data:`TABLE_SCALING` fitted on ``train`` alone: :math:`x \\mapsto (x - \\bar x_{train}) / s_{train}`, so no
    statistic of the held-out rows reaches the model (they were fitted on the whole data set before)."""
    fitted_on = train.X.double().numpy()

    def scaled(part: GroupedDataset) -> GroupedDataset:
        X = scale(part.X.double().numpy(), TABLE_SCALING, fitted_on=fitted_on)
        info = {**part.info, "scaling": TABLE_SCALING, "scaling_fitted_on": f"the {len(train)} training rows"}
        return replace(part, X=torch.from_numpy(X.astype(np.float32)), info=info)

    return scaled(train), scaled(held_out)


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
    start, start_cpu = time.perf_counter(), time.process_time()
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
    row["cpu_seconds"] = time.process_time() - start_cpu
    row["requested_epsilon"] = epsilon
    return row


def calibrated_sigma(config, *, n: int) -> float:
    """sigma_p of :func:`~dpfair_analysis.privacy.pfld_accounting.calibrate_pfld_noise` for this
    run shape (n, batch size, epochs, epsilon, delta, ratios, accounting, variant), cached
    in memory and in the run cache: the PLD calibration takes about a minute and is the
    same for every fold and constraint. Passing it as ``noise_multiplier`` with the same
    ratios gives exactly the calibrated run; epsilon is still computed from the ledger."""
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
        return NAMES[group_by]
    return dataset


def paper_methods(table: str) -> tuple[str, ...]:
    """The methods of :data:`TABLE_METHODS` that the paper's Table 2 prints for ``table`` (a :func:`table_name`):
    Z is "NA" on M-Bank3 and M-Bank5, whose three and five groups Zafar et al.'s covariance constraint cannot take."""
    printed = set(PAPER_TABLE2.loc[PAPER_TABLE2["dataset"] == table, "method"])
    return tuple(m for m in TABLE_METHODS if m in printed)


def table2(dataset: str = "income", *, constraints: Sequence[str] = KINDS, methods: Sequence[str] = TABLE_METHODS,
           folds: int | None = None, epsilon: float = 1.0, profile: str = "full", group_by: str | None = None,
           settings: PfldSettings | None = None, cache: RunCache | None = None,
           progress: bool = False, backend: Backend | None = None,
           records: RunRecords | None = None) -> pd.DataFrame:
    """paper 003 Table 2 for one data set: one row per (method, constraint, fold) with
    test accuracy and fairness violation (the shared metric), epsilon and diagnostics.

    The runs go through :func:`~.sweep.run_sweep` (``cache``, ``backend``, ``records``: each run's row served
    from and recorded in a committed records file)."""
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
    runs = [table2_run(data, splits, dataset=dataset, group_by=group_by, settings=settings, method=method, kind=kind,
                       fold=f, epsilon=epsilon) for kind, method, f in cells]
    results = run_sweep(runs, cache=cache, backend=backend, progress=progress, desc=f"Table 2 {dataset}",
                        records=records)
    rows = []
    for (kind, method, f), result in zip(cells, results):
        row = dict(result[kind] if method == "clf" else result)
        row.update(dataset=table_name(dataset, group_by), constraint=kind, fold=f)
        rows.append(row)
    return pd.DataFrame(rows)


def table2_run(data: GroupedDataset, splits: list[tuple[np.ndarray, np.ndarray]], *, dataset: str,
               group_by: str | None, settings: PfldSettings, method: str, kind: str, fold: int,
               epsilon: float) -> Run:
    """One run of :func:`table2`: ``method`` under ``kind`` trained on fold ``fold``'s training rows of ``data``
    (``splits``: :func:`cv_folds`), scaled on them, and tested on its test rows. CLF does not depend on the
    constraint: one fit per fold (one key), scored under every constraint."""
    train, test = scaled_on_train(data.subset(splits[fold][0]), data.subset(splits[fold][1]))
    key = table2_key(dataset=dataset, group_by=group_by, settings=settings, method=method, kind=kind, fold=fold,
                     epsilon=epsilon)
    if method == "clf":
        compute = partial(_clf_for_every_constraint, train, test, settings, seed=settings.seed + fold)
    else:
        compute = partial(run_method, method, kind, train, test, settings=settings, epsilon=epsilon,
                          seed=settings.seed + fold)
    name = table_name(dataset, group_by)
    return Run(key, compute, label=f"Table 2 {name}: {method} {'any' if method == 'clf' else kind} fold {fold}, "
                                   "printed configuration")


#: the grouping a Table 2 data set's loader uses when none is named (Bank: 25-60 against the rest)
DEFAULT_GROUP_BY = {"bank": "age"}


def keyed_group_by(dataset: str, group_by: str | None) -> str | None:
    """``group_by`` as a run's key names it: None for the loader's default grouping, so naming it (Bank's "age", as
    the pfld notebook does) and leaving it out (``dpfair pfld-table --data bank``, the committed records) are one
    run."""
    return None if group_by is not None and DEFAULT_GROUP_BY.get(dataset) == group_by else group_by


def table2_key(*, dataset: str, group_by: str | None, settings: PfldSettings, method: str, kind: str, fold: int,
               epsilon: float) -> str:
    """The run cache's and the records' key of a :func:`table2_run` (everything that determines it)."""
    return config_key("pfld-table2", dataset, keyed_group_by(dataset, group_by), _settings_key(settings), method,
                      "any" if method == "clf" else kind, fold, epsilon if method in PRIVATE_METHODS else None,
                      *_variant(method))


def _variant(method: str) -> tuple[str, ...]:
    """Extra cache-key parts for PF-LD: runs made before its public part had its own batch
    (same key, other numbers) must not be served as the corrected method."""
    return ("public-batch:independent",) if method == "pfld" else ()


def _clf_for_every_constraint(train: GroupedDataset, test: GroupedDataset, settings: PfldSettings, *,
                              seed: int, lr: float | None = None) -> dict[str, dict[str, Any]]:
    """CLF ignores the constraint: fit once, score its predictions under dp, eo and ap (``lr``: the learning
    rate, None for :func:`~dpfair_analysis.training.baselines.fit_clf`'s default)."""
    from dpfair_analysis.training.baselines import evaluate_predictions, fit_clf

    start, start_cpu = time.perf_counter(), time.process_time()
    base = make_constraint("dp", n_groups=train.n_groups, n_classes=train.n_classes)
    fitted = fit_clf(train, base, epochs=settings.epochs, batch_size=min(settings.batch_size, len(train)),
                     seed=seed, **({} if lr is None else {"lr": lr}))
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - start_cpu
    out = {}
    for kind in KINDS:
        if kind in ("dp", "eo") and train.n_classes != 2:
            continue
        constraint = make_constraint(kind, n_groups=train.n_groups, n_classes=train.n_classes)
        te = evaluate_predictions(fitted.predict(test.X), test, constraint)
        tr = evaluate_predictions(fitted.predict(train.X), train, constraint)
        out[kind] = {"method": "clf", "constraint": kind, "accuracy": te["accuracy"], "violation": te["violation"],
                     "train_accuracy": tr["accuracy"], "train_violation": tr["violation"], "epsilon": None,
                     "privacy": "none", "seconds": seconds, "cpu_seconds": cpu_seconds, "requested_epsilon": None}
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
def _configured(configuration: dict[str, Any], settings: PfldSettings) -> tuple[PfldSettings, dict[str, Any]]:
    """(settings, overrides) of a configuration: ``epochs`` counts in the full profile's 10 (the quick profile
    scales it to its own, at least 1) and goes to the settings; the rest are :func:`run_method`'s overrides."""
    overrides = dict(configuration)
    epochs = overrides.pop("epochs", None)
    if epochs is not None:
        settings = replace(settings, epochs=max(1, round(epochs * settings.epochs / PfldSettings().epochs)))
    return settings, overrides


def _sweep(dataset: str, name: str, grid: list[dict[str, Any]], *, kind: str, profile: str,
           settings: PfldSettings | None, cache: RunCache | None, progress: bool, seeds: int | None,
           backend: Backend | None = None, h_norm_rows: int = 0,
           bases: dict[tuple[str, int], dict[str, Any]] | None = None) -> pd.DataFrame:
    """The runs of one figure: every point of ``grid`` (a method, an epsilon and the swept options) on each
    seed's 80/20 split. ``bases`` (:func:`~dpfair_analysis.experiments.pfld_tuned.tuned_bases`): per (method, seed) a tuned configuration the point
    starts from (the swept option overrides it); rows then carry ``base`` (the configuration in words)."""
    settings = settings or with_profile(profile)
    n_seeds = seeds if seeds is not None else settings.sweep_seeds
    data = load_table_data(dataset, subsample=settings.subsample, seed=settings.seed)
    cells = [(dict(point), s) for point in grid for s in range(n_seeds)]
    runs = []
    for point, s in cells:
        train, test = scaled_on_train(*data.split(0.2, seed=settings.seed + s, stratify="group_label"))
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


def epsilon_sweep(dataset: str = "compas", *, kind: str = "dp", epsilons: Sequence[float] = (0.1, 0.5, 1.0, 2.0, 5.0),
                  methods: Sequence[str] = ("pfld", "m"), profile: str = "full", settings: PfldSettings | None = None,
                  seeds: int | None = None, cache: RunCache | None = None, progress: bool = False,
                  backend: Backend | None = None,
                  bases: dict[tuple[str, int], dict[str, Any]] | None = None) -> pd.DataFrame:
    """Figure 1: accuracy and violation against epsilon, PF-LD and M (tidy rows). ``bases``: per (method,
    seed) the tuned configuration every point starts from (:func:`~dpfair_analysis.experiments.pfld_tuned.tuned_bases`; None: the printed one)."""
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
        from dpfair_analysis.training.lagrangian import train_lagrangian

        data = load_table_data(dataset, subsample=settings.subsample, seed=settings.seed)
        train, test = scaled_on_train(*data.split(0.2, seed=settings.seed, stratify="group_label"))
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
