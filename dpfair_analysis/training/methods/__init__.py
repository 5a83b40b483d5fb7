"""One home per training method: what it is, its options, how it is built, and how the rest of the toolkit sees
it -- its equal-privacy rule, its view for the diagnosis, its audit and its command-line flags.

A method is a :class:`Method` registered by name (:func:`register`, into :mod:`.registry`, a leaf that imports
none of the methods; a taken name is refused): the comparison (``dpfair compare``,
:mod:`dpfair_analysis.experiments.compare`), the diagnosis (:mod:`dpfair_analysis.diagnose.mechanisms`), the
audits of the trainers as they run (:mod:`dpfair_analysis.verify.audits.trainers`) and the command line read
this registry and nothing method-specific of their own. Adding a method is one module that builds a
:class:`Method` and registers it (see ``tests/training/test_methods.py``, which does so from a test file).

The shipped methods, one module each: :mod:`.sgd`, :mod:`.dpsgd`, :mod:`.naive` and :mod:`.dpsgdf` (paper 000),
:mod:`.optq` (Andrew et al. 2021), :mod:`.bounded_adaptive` (Zhao et al. 2025, later work),
:mod:`.global_adapt` (Esipova et al. 2023, later work), :mod:`.fairdp` (paper 002) -- clipping policies of the one
training loop --
and :mod:`.dpfedavg` (McMahan et al. 2018), a trainer of its own. PF-LD (paper 003) trains a different
objective (fairness constraints by Lagrangian duality) with its own configuration and command
(``dpfair train``, :mod:`dpfair_analysis.training.lagrangian`); it is not a method of the comparison.
"""

from dpfair_analysis.training.methods.flags import Flag, checked, flag_of, option_flags, options_from_flags, \
    parse_method
from dpfair_analysis.training.methods.registry import REGISTRY, DiagnosisView, Method, NoOptions, RunContext, get, \
    names, register, unregister

# the shipped methods register themselves, in the order tables list them
from dpfair_analysis.training.methods import sgd  # noqa: F401,I001
from dpfair_analysis.training.methods import dpsgd  # noqa: F401
from dpfair_analysis.training.methods import naive  # noqa: F401
from dpfair_analysis.training.methods import dpsgdf  # noqa: F401
from dpfair_analysis.training.methods import optq  # noqa: F401
from dpfair_analysis.training.methods import bounded_adaptive  # noqa: F401
from dpfair_analysis.training.methods import global_adapt  # noqa: F401
from dpfair_analysis.training.methods import fairdp  # noqa: F401
from dpfair_analysis.training.methods import dpfedavg  # noqa: F401

__all__ = ["REGISTRY", "DiagnosisView", "Flag", "Method", "NoOptions", "RunContext", "checked", "flag_of", "get",
           "names", "option_flags", "options_from_flags", "parse_method", "register", "unregister"]
