"""One home per training method: what it is, its options, how it is built, and how the rest of the toolkit sees
it -- its equal-privacy rule, its view for the diagnosis, its audit and its command-line flags.

A method is a :class:`Method` registered by name (:func:`register`): the comparison (``dpfair compare``,
:mod:`dpfair_analysis.experiments.compare`), the diagnosis (:mod:`dpfair_analysis.diagnose.mechanisms`), the
audits of the trainers as they run (:mod:`dpfair_analysis.verify.audits.trainers`) and the command line read
this registry and nothing method-specific of their own. Adding a method is one module that builds a
:class:`Method` and registers it (see ``tests/training/test_methods.py``, which does so from a test file).

The shipped methods, one module each: :mod:`.sgd`, :mod:`.dpsgd`, :mod:`.naive` and :mod:`.dpsgdf` (paper 000),
:mod:`.optq` (Andrew et al. 2021), :mod:`.bounded_adaptive` (Zhao et al. 2025, later work),
:mod:`.global_adapt` (Esipova et al. 2023, later work), :mod:`.fairdp` (paper 002) -- clipping policies of the one training loop --
and :mod:`.dpfedavg` (McMahan et al. 2018), a trainer of its own. PF-LD (paper 003) trains a different
objective (fairness constraints by Lagrangian duality) with its own configuration and command
(``dpfair train``, :mod:`dpfair_analysis.training.lagrangian`); it is not a method of the comparison.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any, Callable

#: The registered methods by name, in the order they were registered.
REGISTRY: dict[str, "Method"] = {}


@dataclass(frozen=True)
class RunContext:
    """What a method's policy may depend on besides its own options: the run's uniform clipping bound C and
    noise multiplier sigma, its expected batch size b, and -- for FairDP's Eq. (4) -- the model's parameter
    count and the step size."""

    clip_bound: float
    noise_multiplier: float
    batch_size: int = 256
    dimension: int | None = None
    learning_rate: float | None = None


@dataclass(frozen=True)
class DiagnosisView:
    """What the diagnosis knows of a run when it asks a method for its step (:attr:`Method.diagnosis`): the
    plan's C, sigma, expected batch size b, sampling rate q, step size, the training set's group sizes n_k
    (a float tensor) and size n, and the model's parameter count P."""

    clip_bound: float
    noise_multiplier: float
    batch_size: float
    sampling_rate: float
    learning_rate: float
    group_sizes: Any
    n: int
    dimension: int


def group_bounds_step(norms, group, group_bounds, view: DiagnosisView):
    """A per-group-bound method's step as the diagnosis sees it: each row's bound C_{k(i)}, its coefficient
    c_i = min(1, C_{k(i)} / ||g_i||), and the noise std sigma max_k C_k (the noise covers the largest bound)."""
    from dpfair_analysis.gradients import clip_factors

    bounds = group_bounds[group]
    return bounds, clip_factors(norms, bounds), view.noise_multiplier * float(group_bounds.max())


@dataclass(frozen=True)
class NoOptions:
    """A method without options of its own."""


@dataclass(frozen=True)
class Method:
    """One training method (module docstring).

    Parameters
    ----------
    name : str
        Its name in ``--methods`` and every table (lowercase letters).
    label : str
        How tables and figures print it.
    summary : str
        One line: what it is and where it comes from.
    options : type
        A frozen dataclass of its own options (validated in ``__post_init__``, with messages that start with the
        field's name; defaults are its defaults). A field's metadata ``{"flag": "--name", "help": "...", "type":
        int, "choices": (...)}`` makes it a command-line flag of ``dpfair compare`` (``type`` parses the text;
        ``__post_init__`` checks the value and the command line names the flag of a refused one); methods that
        name the same flag share it.
    policy : callable or None
        ``policy(options, context: RunContext) -> ClippingPolicy`` for a method of the training loop; None for a
        trainer of its own (:attr:`trainer`).
    trainer : callable or None
        For a method that is not a policy of the loop: ``trainer(run_config, *, model, train_data, test_data,
        equal_privacy_epsilon, progress) -> TrainingResult``, with ``run_config`` from :attr:`run_config`.
    run_config : callable or None
        A trainer's settings for one run (required with :attr:`trainer`): ``run_config(options, *, n_train,
        seed, context, train) -> config`` (``train``: the comparison's TrainConfig); the cache key hashes it.
    run_info : callable or None
        A trainer's extra run record: ``run_info(result) -> dict`` (DP-FedAvg's rounds and client sampling).
    private : bool
        Whether it is differentially private.
    privacy_unit : str
        What its (epsilon, delta) protects: ``"record"``, or e.g. ``"client (user-level)"``.
    equal_privacy : bool
        In an equal-privacy comparison it stops when its epsilon reaches DP-SGD's for the full run (paper 000
        §6.1.3): its releases' joint multiplier is not sigma's (or its privacy unit differs).
    diagnosis : callable or None
        ``diagnosis(options, norms, group, view: DiagnosisView) -> (bounds C_i, coefficients c_i, noise std s)``:
        its step as the diagnosis predicts it, on a batch's expected, noise-free statistics (None: not diagnosed).
    canary : callable or None
        ``canary(record, clip_bound) -> (bound, weight)``: the audit's canary group's clipping bound and weight
        at one step, read from the step's released record (None: not audited by the trainer audits' loop).
    audit_options : callable or None
        ``audit_options(sigma) -> dict``: options the sampled audit trains it with at the audit's noise multiplier
        sigma, beside its count-noise rule (None: none) -- for a method whose adaptive state would otherwise often
        leave the canary's contribution far below its bound in the audit's two-row batches (the audit would then
        lack power; the method's claim is unchanged).
    """

    name: str
    label: str
    summary: str
    options: type = NoOptions
    policy: Callable[[Any, RunContext], Any] | None = None
    trainer: Callable[..., Any] | None = None
    run_config: Callable[..., Any] | None = None
    run_info: Callable[[Any], dict] | None = field(default=None, repr=False)
    private: bool = True
    privacy_unit: str = "record"
    equal_privacy: bool = False
    diagnosis: Callable[..., Any] | None = field(default=None, repr=False)
    canary: Callable[[dict, float], tuple[float, float]] | None = field(default=None, repr=False)
    audit_options: Callable[[float], dict] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.name.isalpha() or not self.name.islower():
            raise ValueError(f"a method's name must be lowercase letters, got {self.name!r}")
        if (self.policy is None) == (self.trainer is None):
            raise ValueError(f"method {self.name!r} needs exactly one of policy and trainer")
        if (self.trainer is None) != (self.run_config is None):
            raise ValueError(f"method {self.name!r}: a trainer needs its run_config, and only a trainer has one")
        if not (dataclasses.is_dataclass(self.options) and self.options.__dataclass_params__.frozen):
            raise TypeError(f"method {self.name!r}: options must be a frozen dataclass, got {self.options!r}")

    def default_options(self) -> Any:
        return self.options()

    def build_policy(self, options: Any, context: RunContext):
        """The clipping policy of a run (ValueError for a trainer of its own)."""
        if self.policy is None:
            raise ValueError(f"{self.name} is a trainer of its own, not a clipping policy of the loop")
        return self.policy(self.check_options(options), context)

    def build_run_config(self, options: Any, *, n_train: int, seed: int, context: RunContext, train) -> Any:
        """A trainer's settings for one run on ``n_train`` rows (ValueError for a policy of the loop)."""
        if self.run_config is None:
            raise ValueError(f"{self.name} is a clipping policy of the loop, not a trainer of its own")
        return self.run_config(self.check_options(options), n_train=n_train, seed=seed, context=context,
                               train=train)

    def check_options(self, options: Any) -> Any:
        """``options`` if they are this method's (TypeError naming the method otherwise)."""
        if options is None:
            return self.options()
        if not isinstance(options, self.options):
            raise TypeError(f"options of {self.name} must be {self.options.__name__}, got {type(options).__name__}")
        return options


def register(method: Method) -> Method:
    """Add ``method`` to :data:`REGISTRY` (ValueError if its name is taken by another method).

    Parameters
    ----------
    method : Method
        The method to register under ``method.name``.

    Returns
    -------
    Method
        ``method`` itself (so a module can write ``METHOD = register(Method(...))``).
    """
    if not isinstance(method, Method):
        raise TypeError(f"method must be a Method, got {type(method).__name__}")
    if method.name in REGISTRY and REGISTRY[method.name] is not method:
        raise ValueError(f"a method named {method.name!r} is registered already")
    REGISTRY[method.name] = method
    return method


def unregister(name: str) -> None:
    """Remove a method (for tests that register a toy one).

    Parameters
    ----------
    name : str
        The registered name; an unknown name is ignored.
    """
    REGISTRY.pop(name, None)


def get(name: str) -> Method:
    """The registered method ``name`` (ValueError naming the registered ones otherwise).

    Parameters
    ----------
    name : str
        A registered method (``names()``).
    """
    if name not in REGISTRY:
        raise ValueError(f"method must be one of {list(REGISTRY)}, got {name!r}")
    return REGISTRY[name]


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def parse_method(method: str, *, default_clip: float) -> tuple[str, float]:
    """``"dpsgd(C=2)"`` -> ``("dpsgd", 2.0)``; other names keep ``default_clip`` (ValueError naming the
    registered methods otherwise). Reads only the registry, so the command line checks ``--methods`` with it
    before importing torch.

    Parameters
    ----------
    method : str
        A registered name, or ``NAME(C=<bound>)`` with the run's uniform clipping bound.
    default_clip : float
        The bound of a name without ``(C=...)``.
    """
    known = list(names())
    match = re.fullmatch(r"\s*([a-z]+)\s*(?:\(\s*C\s*=\s*([^)]+)\))?\s*", str(method))
    if match is None or match.group(1) not in known:
        raise ValueError(f"method must be one of {known} or 'dpsgd(C=<bound>)', got {method!r}")
    name, clip = match.groups()
    if clip is None:
        return name, default_clip
    try:
        return name, float(clip)
    except ValueError:
        raise ValueError(f"method {method!r}: C must be a number, got {clip!r}") from None


@dataclass(frozen=True)
class Flag:
    """One command-line flag of the methods' options: its name, the parser of its text (``type``), its allowed
    values (``choices``, or None), the default, help, and the (method, field) pairs it sets."""

    flag: str
    type: Callable[[str], Any]
    choices: tuple | None
    default: Any
    help: str
    targets: tuple[tuple[str, str], ...]

    @property
    def dest(self) -> str:
        """The attribute argparse stores it under (``--excess-cap`` -> ``excess_cap``)."""
        return self.flag.lstrip("-").replace("-", "_")


def option_flags() -> list[Flag]:
    """The flags every registered method's options declare (a flag named by several methods is one flag)."""
    flags: dict[str, Flag] = {}
    for method in REGISTRY.values():
        for f in dataclasses.fields(method.options):
            meta = f.metadata
            if "flag" not in meta:
                continue
            default = f.default if f.default is not dataclasses.MISSING else None
            known = flags.get(meta["flag"])
            targets = (known.targets if known else ()) + ((method.name, f.name),)
            labels = ", ".join(REGISTRY[m].label for m, _ in targets)
            help_text = f"{labels}: {meta.get('help', f.name)}"  # the first method's words, every method's label
            if known is not None:
                help_text = f"{labels}: {known.help.split(': ', 1)[1]}"
            flags[meta["flag"]] = Flag(meta["flag"], meta.get("type", str), meta.get("choices"), default, help_text,
                                       targets)
    return list(flags.values())


def options_from_flags(values: dict[str, Any]) -> dict[str, Any]:
    """Each method's options from flag values ``{flag: value}`` (a value of None keeps the field's default);
    a bad value is an :class:`~dpfair_analysis.errors.ArgumentError` naming its flag.

    Parameters
    ----------
    values : dict
        ``{flag: value}`` as parsed from the command line (``option_flags()`` lists the flags).
    """
    changes: dict[str, dict[str, Any]] = {}
    for flag in option_flags():
        value = values.get(flag.flag)
        if value is None:
            continue
        for method, name in flag.targets:
            changes.setdefault(method, {})[name] = value
    return {method: checked(method, lambda m=method, f=fields: get(m).options(**f))
            for method, fields in changes.items()}


def flag_of(method: str, message: str) -> str | None:
    """The command-line flag of ``method``'s option that an error ``message`` names first (messages of the
    toolkit's checks start with the argument's name), or None.

    Parameters
    ----------
    method : str
        A registered method.
    message : str
        The error message of a check of one of its options.
    """
    first = re.match(r"\w+", str(message))
    for f in dataclasses.fields(get(method).options):
        if "flag" in f.metadata and first is not None and first.group() == f.name:
            return f.metadata["flag"]
    return None


def checked(method: str, build: Callable[[], Any]) -> Any:
    """``build()``, with a ValueError or TypeError about one of ``method``'s options re-raised as an
    :class:`~dpfair_analysis.errors.ArgumentError` naming that option's flag (so the command line says which).

    Parameters
    ----------
    method : str
        A registered method.
    build : callable
        Builds the method's options or policy; called once, without arguments.
    """
    from dpfair_analysis.errors import ArgumentError

    try:
        return build()
    except (ValueError, TypeError) as error:
        flag = flag_of(method, str(error))
        if flag is None or isinstance(error, ArgumentError):
            raise
        raise ArgumentError(flag, f"{method}: {error}") from None


# the shipped methods register themselves, in the order tables list them (imported last: they import this module)
from dpfair_analysis.training.methods import sgd  # noqa: E402,F401,I001
from dpfair_analysis.training.methods import dpsgd  # noqa: E402,F401
from dpfair_analysis.training.methods import naive  # noqa: E402,F401
from dpfair_analysis.training.methods import dpsgdf  # noqa: E402,F401
from dpfair_analysis.training.methods import optq  # noqa: E402,F401
from dpfair_analysis.training.methods import bounded_adaptive  # noqa: E402,F401
from dpfair_analysis.training.methods import global_adapt  # noqa: E402,F401
from dpfair_analysis.training.methods import fairdp  # noqa: E402,F401
from dpfair_analysis.training.methods import dpfedavg  # noqa: E402,F401
