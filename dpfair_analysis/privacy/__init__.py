"""Privacy: accounting from dp_accounting events (:mod:`.accounting`), Gaussian releases
on one batch (:mod:`.mechanisms`), output perturbation (:mod:`.output_perturbation`)."""

from dpfair_analysis.privacy.accounting import *  # noqa: F401,F403  (the accounting API, see its __all__)
from dpfair_analysis.privacy.accounting import __all__
