"""The method registry: what a method is (:class:`Method`, its :class:`RunContext` and :class:`DiagnosisView`) and
:data:`REGISTRY`, the methods by name. A leaf: it imports none of the methods; each method's module registers
itself here (:func:`register`), and a taken name is refused."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable

from dpfair_analysis.validation import check_name_free

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
    (a float tensor) and size n, the model's parameter count P, and the run's step count T (None: as many as an
    adaptive method's update needs to settle)."""

    clip_bound: float
    noise_multiplier: float
    batch_size: float
    sampling_rate: float
    learning_rate: float
    group_sizes: Any
    n: int
    dimension: int
    steps: int | None = None


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
        ``canary(record, clip_bound, *, group) -> (bound, weight)``: the clipping bound and weight of a canary of
        group ``group`` (a code) at one step, read from the step's released record (None: not audited by the
        trainer audits' loop; the sampled audits' canary is group 1, the one-run audit's canaries every group).
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
    canary: Callable[..., tuple[float, float]] | None = field(default=None, repr=False)
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
    """Add ``method`` to :data:`REGISTRY` (ValueError if its name is taken).

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
    REGISTRY[check_name_free(method.name, REGISTRY, "method")] = method
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
