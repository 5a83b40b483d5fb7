"""The one-run audit of DP-SGD per group, in ONE run of the shipped trainer (issue 52.2).

Each group gets its own canaries, drawn from rows of that group that are not in the training data (a held-out
pool), each included in the run independently with probability 1/2 (:mod:`dpfair_analysis.testing.one_run`).
Two families, both in the same run:

* ``gradient`` canaries (white box, as the sampled audits of :mod:`.trainers`): the group's row with one more
  feature of its own (value :data:`CANARY_VALUE`; 0 in every other row and every other canary), so its gradient
  has a fixed direction that no other record moves: its own weight. The adversary sees the model after every
  step and each step's released noise scale and scores canary i by the Neyman-Pearson statistic of its
  coordinate's trajectory (:func:`~dpfair_analysis.testing.steps.poisson_gaussian_llr`): the step update of
  that weight, in units of the noisy sum, is z_t = 1[i in B_t] u_t + N(0, s_t^2), u_t its clipped gradient
  coordinate at theta_t;
* ``input`` canaries (black box): the group's row as it is; score = the gain of its label's log-likelihood
  from the initial to the final model.

The run is :func:`~dpfair_analysis.training.loop.train` with the DP-SGD, DPSGD-F or FairDP policy as shipped (its
Poisson sampling at q = b / n, all its steps; the claim is the run's own ``result.epsilon``). A group-g canary's
contribution is clipped at the bound and weighted by the weight the method's registered rule reads from the step's
released record for group g (``Method.canary(record, C, group=g)``): under DPSGD-F and FairDP the group's released
bound C[g], so the groups' canaries see different signal-to-noise ratios in the same run -- the per-group audit is
where that shows. Each canary's gradient norms are recorded at every step, so its per-record estimate epsilon_i
(an ex-post estimate, not a guarantee) sits beside the audit: DP-SGD's
(:func:`~dpfair_analysis.privacy.individual.individual_privacy`), and under the group bounds each step's
sensitivity relative to the joint noise, the counts (and FairDP's capped excess) charged in full
(:func:`~dpfair_analysis.experiments.group_privacy.record_sensitivities`). The bounds are family-wise over every
(group, family) canary set (Bonferroni).

:func:`adult_by_sex` runs it on Adult by sex at a target epsilon (the issue's numbers), and
``dpfair privacy one-run`` (:func:`adult_by_sex_grid`) at several::

    dpfair privacy one-run --epsilons 1,2,4 --per-group 1000 --seeds 3 --json
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd
import torch

from dpfair_analysis.data.adult import adult
from dpfair_analysis.data.dataset import GroupedDataset
from dpfair_analysis.errors import ArgumentError
from dpfair_analysis.experiments.group_privacy import GROUP_PRIVACY_METHODS, record_sensitivities
from dpfair_analysis.gradients import flatten, parameters_of, per_sample_gradients
from dpfair_analysis.models import build_model, count_parameters
from dpfair_analysis.privacy.accounting import calibrate_noise_multiplier, dpsgd_epsilon, steps_for_epochs
from dpfair_analysis.privacy.individual import DEFAULT_RESOLUTION, individual_privacy
from dpfair_analysis.privacy.mechanisms import joint_noise_multiplier
from dpfair_analysis.testing.bounds import DEFAULT_CONFIDENCE
from dpfair_analysis.testing.one_run import OneRunBound, audit_groups, one_run_no_power, summary
from dpfair_analysis.testing.steps import poisson_gaussian_llr
from dpfair_analysis.training import methods
from dpfair_analysis.training.loop import TrainConfig, train
from dpfair_analysis.training.policies import make_policy
from dpfair_analysis.validation import check_fraction, check_positive

#: The trainers audited: DP-SGD (every canary clipped at C), DPSGD-F and FairDP (a group-g canary clipped at the
#: step's released group bound C[g]); each weights every clipped gradient 1 and releases noise_std in each step
#: record, and each has a per-record accountant (``experiments.group_privacy.GROUP_PRIVACY_METHODS``).
METHODS = ("dpsgd", "dpsgdf", "fairdp")
#: The gradient canaries' own feature value (their gradient is clipped, almost all of it on that feature).
CANARY_VALUE = 1000.0
FAMILIES = ("gradient", "input")


@dataclass(frozen=True)
class Canaries:
    """m canaries: features already widened by one column per gradient canary, their group, family, own
    column (-1: none) and whether each is in the run."""

    X: torch.Tensor
    y: torch.Tensor
    group: torch.Tensor
    family: np.ndarray
    own_column: np.ndarray
    included: np.ndarray
    value: float = 0.0

    def __len__(self) -> int:
        return len(self.y)


def draw_canaries(pool: GroupedDataset, *, per_group: int, families: tuple[str, ...] = FAMILIES,
                  value: float = CANARY_VALUE, seed: int = 0) -> Canaries:
    """``per_group`` canaries of each family for each group, rows drawn without replacement from the group's
    rows of ``pool``; each included with probability 1/2.

    Parameters
    ----------
    pool : GroupedDataset
        Rows not in the training data (tabular).
    per_group : int
        Canaries per group and family (>= 10).
    families : tuple of str
        Among :data:`FAMILIES`.
    value : float
        The gradient canaries' own feature value V (> 0): large enough that |sigmoid(z) - y| V stays above the
        clipping bound, small enough that V times the own weight's movement keeps the logit unsaturated.
    seed : int
        Draws the rows and the inclusions.
    """
    value = check_positive(value, "value")
    if any(f not in FAMILIES for f in families) or not families:
        raise ValueError(f"families must be a non-empty subset of {FAMILIES}, got {families!r}")
    if isinstance(per_group, bool) or not isinstance(per_group, int) or per_group < 10:
        raise ValueError(f"per_group must be an integer >= 10, got {per_group!r}")
    rng = np.random.default_rng(seed)
    rows, family = [], []
    for g in range(pool.n_groups):
        members = np.flatnonzero(pool.group.numpy() == g)
        if len(members) < per_group * len(families):
            raise ArgumentError("per_group", f"the held-out pool has {len(members)} rows of group "
                                             f"{pool.group_names[g]!r}, so at most {len(members) // len(families)} "
                                             f"canaries per group and family; got {per_group}")
        chosen = rng.choice(members, size=per_group * len(families), replace=False)
        for i, name in enumerate(families):
            rows.append(chosen[i * per_group:(i + 1) * per_group])
            family += [name] * per_group
    index = np.concatenate(rows)
    family = np.array(family)
    gradient = family == "gradient"
    own = np.full(len(index), -1)
    own[gradient] = pool.X.shape[1] + np.arange(int(gradient.sum()))
    X = torch.zeros(len(index), pool.X.shape[1] + int(gradient.sum()))
    X[:, :pool.X.shape[1]] = pool.X[torch.from_numpy(index)]
    X[torch.from_numpy(np.flatnonzero(gradient)), torch.from_numpy(own[gradient])] = value
    return Canaries(X=X, y=pool.y[torch.from_numpy(index)], group=pool.group[torch.from_numpy(index)],
                    family=family, own_column=own, included=rng.random(len(index)) < 0.5, value=value)


def with_canaries(train_data: GroupedDataset, canaries: Canaries) -> GroupedDataset:
    """The training data widened by the canaries' own columns (0 in every real row), the included canaries
    appended."""
    width = canaries.X.shape[1]
    X = torch.zeros(len(train_data), width)
    X[:, :train_data.X.shape[1]] = train_data.X
    keep = torch.from_numpy(np.flatnonzero(canaries.included))
    extra = tuple(f"canary{i}" for i in range(width - train_data.X.shape[1]))
    return GroupedDataset(X=torch.cat([X, canaries.X[keep]]), y=torch.cat([train_data.y, canaries.y[keep]]),
                          group=torch.cat([train_data.group, canaries.group[keep]]),
                          group_names=train_data.group_names, label_names=train_data.label_names,
                          feature_names=tuple(train_data.feature_names) + extra if train_data.feature_names
                          else (), name=f"{train_data.name}+canaries")


@dataclass(frozen=True)
class CanaryTrace:
    """What the adversary computes at every theta_t, t = 0..T: the gradient canaries' own weights, their own
    gradient coordinate and every canary's gradient norm and label log-likelihood; ``rows``: n of the run;
    ``noise_multipliers``: the policy's planned multipliers, the clipped sum's first (public: the algorithm's)."""

    rows: int
    weights: np.ndarray
    own_gradient: np.ndarray
    norms: np.ndarray
    log_likelihood: np.ndarray
    noise_multipliers: tuple[float, ...] = ()


def _model(width: int, own_columns: np.ndarray, seed: int) -> torch.nn.Module:
    """Logistic regression, the canaries' own weights started at 0 (the adversary knows the start)."""
    model = build_model("logreg", input_shape=(width,), n_classes=2, seed=seed)
    with torch.no_grad():
        model.linear.weight[:, torch.from_numpy(own_columns)] = 0.0
    return model


def _check_closed_form(model: torch.nn.Module, canaries: Canaries) -> None:
    """The closed-form logistic gradients the trace uses equal the toolkit's per-sample gradients (five
    canaries, at the starting point): a changed model cannot silently break the scores."""
    pick = torch.arange(min(5, len(canaries)))
    X, y = canaries.X[pick], canaries.y[pick]
    reference = flatten(per_sample_gradients(model, X, y)).double()
    params = parameters_of(model)
    residual = torch.sigmoid(X.double() @ params["linear.weight"][0].double() + params["linear.bias"][0].double())
    residual = residual - y.double()
    closed = torch.cat([residual[:, None] * X.double(), residual[:, None]], dim=1)
    if not torch.allclose(reference, closed, rtol=1e-4, atol=1e-6):
        raise RuntimeError("the audit model's per-sample gradients are not the logistic (sigmoid(z) - y) [x, 1]")


def run_with_canaries(train_data: GroupedDataset, canaries: Canaries, *, clip: float, noise_multiplier: float,
                      epochs: int, batch_size: int, lr: float | None, delta: float, method: str = "dpsgd",
                      seed: int = 0):
    """One run of ``train`` as shipped (``method`` in :data:`METHODS`) on the data with the included canaries;
    (result, trace)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    data = with_canaries(train_data, canaries)
    gradient = np.flatnonzero(canaries.own_column >= 0)
    own = canaries.own_column[gradient]
    model = _model(data.X.shape[1], own, seed)
    first = next(iter(parameters_of(model)))
    if first != "linear.weight":
        raise RuntimeError(f"the audit model's first parameter is {first!r}, not 'linear.weight'")
    config = TrainConfig(epochs=epochs, batch_size=batch_size, lr=lr, delta=delta, seed=seed)
    policy = make_policy(method, clip_bound=clip, noise_multiplier=noise_multiplier,
                         dimension=count_parameters(model), learning_rate=config.learning_rate(len(data)),
                         batch_size=batch_size)
    weights, own_gradient, norms, log_likelihood = [], [], [], []
    X_c = canaries.X.double()
    sign = canaries.y.double()
    scale = torch.sqrt((X_c ** 2).sum(dim=1) + 1.0)  # ||[x, 1]||

    def watch(t: int, model: torch.nn.Module, state: object) -> None:
        params = parameters_of(model)
        if t == 0:
            _check_closed_form(model, canaries)
        w, b = params["linear.weight"][0].double(), params["linear.bias"][0].double()
        z = X_c @ w + b
        residual = torch.sigmoid(z) - sign  # the logistic gradient is (sigmoid(z) - y) [x, 1]
        weights.append(w[torch.from_numpy(own)].numpy().copy())
        own_gradient.append((residual[torch.from_numpy(gradient)] * canaries.value).numpy().copy())
        norms.append((residual.abs() * scale).numpy().copy())
        log_likelihood.append((-torch.nn.functional.softplus(-(2 * sign - 1) * z)).numpy().copy())

    result = train(model, data, policy, config, progress=False, callbacks=[watch])
    planned = list(policy.planned_noise_multipliers())
    planned.remove(policy.noise_multiplier)
    trace = CanaryTrace(len(data), np.stack(weights), np.stack(own_gradient), np.stack(norms), np.stack(log_likelihood),
                        noise_multipliers=(float(policy.noise_multiplier), *map(float, planned)))
    return result, trace


def canary_clipping(result: Any, groups: np.ndarray, *, clip: float) -> tuple[np.ndarray, np.ndarray]:
    """(T, m) each: the bound each canary's gradient is clipped at on each step and its weight, by the method's
    registered rule for the canary's group, ``Method.canary(record, C, group=g)``, read from the step's released
    record (DPSGD-F's and FairDP's group bound C[g]; DP-SGD's uniform C)."""
    rule = methods.get(result.policy).canary
    per_group = {}
    for g in np.unique(groups):
        pairs = [rule(record, clip, group=int(g)) for record in result.steps.to_dict("records")]
        per_group[g] = np.asarray(pairs, dtype=np.float64).reshape(len(pairs), 2)
    bounds = np.stack([per_group[g][:, 0] for g in groups], axis=1)
    return bounds, np.stack([per_group[g][:, 1] for g in groups], axis=1)


def canary_scores(result: Any, trace: CanaryTrace, canaries: Canaries, *, clip: float) -> np.ndarray:
    """Each canary's score (module docstring): the Poisson-Gaussian LLR of a gradient canary's weight (step
    update z_t = -(w_{t+1} - w_t) b / lr, contribution u_t = its gradient coordinate x w_t min(1, C_t / ||g_t||)
    with C_t and w_t its group's bound and weight of the step (:func:`canary_clipping`), noise s_t the step's
    released ``noise_std``, q = b / n), the label log-likelihood gain of an input canary."""
    steps = len(result.steps)
    b, lr = result.config.batch_size, result.learning_rate
    s = result.steps["noise_std"].to_numpy(dtype=np.float64)
    scores = trace.log_likelihood[-1] - trace.log_likelihood[0]
    gradient = np.flatnonzero(canaries.own_column >= 0)
    z = -np.diff(trace.weights, axis=0)[:steps] * b / lr
    bounds, weights = canary_clipping(result, canaries.group.numpy()[gradient], clip=clip)
    u = trace.own_gradient[:steps] * weights * np.minimum(1.0, bounds / np.maximum(trace.norms[:steps, gradient],
                                                                                   1e-300))
    for j, i in enumerate(gradient):
        scores[i] = poisson_gaussian_llr(z[:, j], u[:, j], s, sampling_rate=b / trace.rows)
    return scores


def canary_epsilons(result: Any, trace: CanaryTrace, canaries: Canaries, *, clip: float) -> np.ndarray:
    """Each canary's per-record estimate epsilon_i from its norms at every step (an ex-post estimate, not a
    guarantee: :mod:`dpfair_analysis.privacy.individual`). Step t charges canary i of group g the sampled
    Gaussian of multiplier :math:`\\sigma_J / s'_{i,t}`, with :math:`s'` of
    :func:`~dpfair_analysis.experiments.group_privacy.record_sensitivities` at the step's bound
    :math:`C_{g,t}` (:func:`canary_clipping`), the largest bound :math:`R_t = \\max_k C_{k,t}` the sum's noise is
    scaled to, and the step's other releases charged in full (DP-SGD: :math:`s' = \\min(\\|g\\|, C)/C`); exact
    curves when the :math:`s'` take few values (DP-SGD's gradient canaries: all 1), the conservative grid
    otherwise. NaN for a method the accountant does not model."""
    if result.policy not in GROUP_PRIVACY_METHODS:
        return np.full(trace.norms.shape[1], np.nan)
    steps = len(result.steps)
    bounds, _ = canary_clipping(result, canaries.group.numpy(), clip=clip)
    columns = [c for c in result.steps.columns if c.startswith("C[")]
    reference = result.steps[columns].to_numpy(dtype=np.float64).max(axis=1) if columns else np.full(steps, clip)
    sigma, *others = trace.noise_multipliers
    sensitivities = record_sensitivities(trace.norms[:steps], bounds, reference=reference[:, None],
                                         noise_multiplier=sigma, other_multipliers=tuple(others))
    few = len(np.unique(sensitivities)) <= DEFAULT_RESOLUTION
    return individual_privacy(sensitivities, clip=1.0, noise_multiplier=joint_noise_multiplier(trace.noise_multipliers),
                              sampling_rate=result.config.batch_size / trace.rows, delta=result.config.delta,
                              accounting=result.config.accounting,
                              resolution=None if few else DEFAULT_RESOLUTION).epsilons


def audit_run_by_group(train_data: GroupedDataset, pool: GroupedDataset, *, per_group: int, clip: float,
                       noise_multiplier: float, epochs: int, batch_size: int, lr: float | None, delta: float,
                       families: tuple[str, ...] = FAMILIES, value: float = CANARY_VALUE,
                       noise_fraction: float = 1.0, method: str = "dpsgd",
                       confidence: float = DEFAULT_CONFIDENCE, seed: int = 0) -> dict[str, Any]:
    """Draw the canaries, run DP-SGD once, score, and audit each (group, family) canary set (module docstring).

    Returns a JSON-ready dict: the run (epsilon, steps, q, sigma), one row per canary set (the bounds of
    :func:`~dpfair_analysis.testing.one_run.audit_groups` beside the run's epsilon and the canaries' mean,
    median and largest epsilon_i) and the summary lines.

    Parameters
    ----------
    train_data, pool : GroupedDataset
        The training rows and the held-out rows the canaries are drawn from.
    per_group : int
        Canaries per group and family.
    clip, noise_multiplier, epochs, batch_size, lr, delta :
        DP-SGD's settings (``lr`` None: 1 / sqrt(T)).
    families : tuple of str
        Among :data:`FAMILIES`.
    value : float
        The gradient canaries' own feature value (:func:`draw_canaries`).
    noise_fraction : float
        1: the run as shipped, its claim its own ``result.epsilon``. f < 1: the under-noised twin -- it trains
        with noise f sigma and claims the epsilon of sigma (the same accountant, steps and q): a control the
        audit must refute (DP-SGD only).
    method : str
        One of :data:`METHODS`.
    confidence : float
        Joint over every canary set and guess count.
    seed : int
        The canaries' draws and the run's.
    """
    canaries = draw_canaries(pool, per_group=per_group, families=families, value=value, seed=seed)
    fraction = check_fraction(noise_fraction, "noise_fraction")
    if fraction < 1 and method != "dpsgd":
        raise ValueError(f"noise_fraction < 1 (the under-noised twin) is DP-SGD's control; method is {method!r}")
    result, trace = run_with_canaries(train_data, canaries, clip=clip, noise_multiplier=noise_multiplier * fraction,
                                      epochs=epochs, batch_size=batch_size, lr=lr, delta=delta, method=method,
                                      seed=seed)
    claim = float(result.epsilon)
    if fraction < 1:
        claim = dpsgd_epsilon(n=trace.rows, batch_size=batch_size, noise_multiplier=noise_multiplier, delta=delta,
                              steps=len(result.steps), accounting=result.config.accounting)
    scores = canary_scores(result, trace, canaries, clip=clip)
    epsilons = canary_epsilons(result, trace, canaries, clip=clip)
    names = np.array([f"{train_data.group_names[g]}/{f}" for g, f in zip(canaries.group.tolist(), canaries.family)])
    audits = audit_groups(scores, canaries.included, names, epsilon_accounted=claim, delta=delta,
                          confidence=confidence)
    bounds, _ = canary_clipping(result, canaries.group.numpy(), clip=clip)
    rows = []
    for audit in audits:
        mine = names == audit.group
        rows.append({**audit.row(), "canary_epsilon_i_mean": float(np.mean(epsilons[mine])),
                     "canary_epsilon_i_median": float(np.median(epsilons[mine])),
                     "canary_epsilon_i_max": float(np.max(epsilons[mine])),
                     "mean_step_bound": float(bounds[:, mine].mean()),
                     "clipped_every_step": float((trace.norms[:len(result.steps), mine] >= bounds[:, mine])
                                                 .all(axis=0).mean()),
                     "mean_noise_std": float(result.steps["noise_std"].mean())})
    return {"method": method, "epsilon": claim, "run_epsilon": float(result.epsilon), "noise_fraction": fraction,
            "delta": delta,
            "steps": len(result.steps),
            "sampling_rate": batch_size / trace.rows, "noise_multiplier": noise_multiplier, "clip": clip,
            "rows": trace.rows, "canaries": len(canaries), "sets": rows, "summary": summary(audits)}


#: DP-SGD's settings of the Adult audit (logistic regression).
ADULT_SETTINGS = {"batch_size": 256, "epochs": 5, "clip": 0.5, "delta": 1e-5}


def adult_by_sex(epsilon: float, *, per_group: int, seed: int = 0, value: float = 1000.0,
                 method: str = "dpsgd", batch_size: int | None = None) -> dict[str, Any]:
    """The audit of one run on Adult (by sex; 80/20 split, the canaries drawn from the 20%) with DP-SGD's noise
    multiplier calibrated to ``epsilon`` at delta = 1e-5 (DPSGD-F at the same noise claims its own, larger,
    epsilon: its counts are released too).

    Parameters
    ----------
    epsilon : float
        The target epsilon.
    per_group : int
        Canaries per group and family.
    seed : int
        The split is fixed (seed 0); the canaries and the run use ``seed``.
    value : float
        The gradient canaries' own feature value.
    method : str
        One of :data:`METHODS`.
    batch_size : int, optional
        b (default ``ADULT_SETTINGS["batch_size"]``; larger b: fewer steps at a larger q, a privacy curve closer
        to Gaussian).
    """
    train_data, pool = adult(by="sex").split(0.2, seed=0)
    rows = len(train_data) + per_group * len(FAMILIES) * train_data.n_groups // 2  # the canaries expected in
    b, epochs = batch_size or ADULT_SETTINGS["batch_size"], ADULT_SETTINGS["epochs"]
    sigma = calibrate_noise_multiplier(epsilon, ADULT_SETTINGS["delta"], sampling_rate=b / rows,
                                       steps=steps_for_epochs(rows, b, epochs))
    out = audit_run_by_group(train_data, pool, per_group=per_group, clip=ADULT_SETTINGS["clip"],
                             noise_multiplier=sigma, epochs=epochs, batch_size=b, lr=None,
                             delta=ADULT_SETTINGS["delta"], value=value, method=method, seed=seed)
    return {"target_epsilon": epsilon, "seed": seed, "per_group": per_group, **ADULT_SETTINGS, "batch_size": b,
            **out}


def adult_by_sex_grid(epsilons: tuple[float, ...], *, seeds: int, per_group: int, method: str = "dpsgd",
                      batch_size: int | None = None, done: Any = None) -> dict[str, Any]:
    """:func:`adult_by_sex` at each epsilon for seeds 0..``seeds`` - 1 (``dpfair privacy one-run``).

    Parameters
    ----------
    epsilons : tuple of float
        The target epsilons.
    seeds : int
        How many seeds (0, 1, ...).
    per_group, method, batch_size
        As :func:`adult_by_sex`.
    done : callable, optional
        ``done(run)`` after each run (progress).

    Returns
    -------
    dict
        ``setting``, ``method``, ``per_group``, ``epsilons``, ``seeds``, ``runs`` (one :func:`adult_by_sex`
        dict each) and ``refuted`` (True when a canary set's audited epsilon exceeds its run's accounted one: a
        bug in the trainer or its accounting).
    """
    if isinstance(seeds, bool) or not isinstance(seeds, int) or seeds < 1:
        raise ValueError(f"seeds must be a positive integer, got {seeds!r}")
    runs = []
    for seed in range(seeds):
        for epsilon in epsilons:
            runs.append(adult_by_sex(epsilon, per_group=per_group, seed=seed, method=method, batch_size=batch_size))
            if done is not None:
                done(runs[-1])
    return {"setting": "adult by sex (80/20 split, canaries from the 20%)", "method": method,
            "per_group": per_group, "epsilons": list(epsilons), "seeds": list(range(seeds)), "runs": runs,
            "refuted": any(row["exceeds_accounted"] for run in runs for row in run["sets"])}


def one_run_table(payloads: list[dict[str, Any]]) -> pd.DataFrame:
    """The one-run audits of :func:`adult_by_sex_grid` payloads (one per method) as one table over their seeds.

    One row per method, target epsilon and canary set (group, family): ``m`` canaries in the set, ``seeds``, the
    runs' accounted epsilon (``run_epsilon``, its mean over seeds), the range over seeds of Steinke et al.'s
    epsilon lower bound (``steinke_min``, ``steinke_max``) and of the f-DP bound from the same guesses (``fdp_min``,
    ``fdp_max``: the epsilon at the run's delta of the lower bound on mu; ``mu_max``), the canaries' mean
    accounted epsilon_i (``epsilon_i_mean``, averaged over seeds; NaN for payloads written before it was recorded),
    their mean step bound, ``refuted``: in how many seeds the set's bound exceeds its run's epsilon (a bug in the
    trainer or its accounting), and ``no_power``: in how many seeds the set could not have refuted its accounted
    epsilon (:func:`~dpfair_analysis.testing.one_run.one_run_no_power`: too few canaries for the claim, or a bound of
    0), so that a row's 0 refuted is read beside the seeds where refuting was possible."""
    rows = []
    for payload in payloads:
        for run in payload["runs"]:
            for row in run["sets"]:
                group, family = row["group"].split("/")
                rows.append({"method": run["method"], "target_epsilon": run["target_epsilon"], "group": group,
                             "family": family, "m": row["canaries"], "seed": run["seed"],
                             "run_epsilon": run["epsilon"], "steinke": row["epsilon_lower"],
                             "fdp": row["mu_epsilon_lower"], "mu": row["mu_lower"],
                             "epsilon_i_mean": row.get("canary_epsilon_i_mean", np.nan),
                             "step_bound": row["mean_step_bound"], "refuted": bool(row["exceeds_accounted"]),
                             "no_power": _set_without_power(row)})
    frame = pd.DataFrame(rows)
    keys = ["method", "target_epsilon", "group", "family"]
    return (frame.groupby(keys, sort=False)
            .agg(m=("m", "first"), seeds=("seed", "nunique"), run_epsilon=("run_epsilon", "mean"),
                 steinke_min=("steinke", "min"), steinke_max=("steinke", "max"), fdp_min=("fdp", "min"),
                 fdp_max=("fdp", "max"), mu_max=("mu", "max"), epsilon_i_mean=("epsilon_i_mean", "mean"),
                 step_bound=("step_bound", "mean"), refuted=("refuted", "sum"), no_power=("no_power", "sum"))
            .reset_index())


def _set_without_power(row: dict[str, Any]) -> bool:
    """Whether a recorded canary set (a row of a payload's ``sets``) could not have refuted its accounted epsilon."""
    bound = OneRunBound(**{f.name: row[f.name] for f in fields(OneRunBound)})
    return one_run_no_power(bound, row["epsilon_accounted"]) is not None
