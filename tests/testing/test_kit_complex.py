"""A complex output is refused as a broken mechanism (status 2), never audited by its real part: numpy's cast to
float keeps the real part only (a ComplexWarning), so a release whose imaginary part is exact passed as private.

Each test failed before the change: `noisy + 1j * exact` was consistent (dpfair audit exit 0), a complex release
passed assert_sensitivity on its real part, and audit_step audited a complex trajectory's real part."""

import textwrap
import warnings

import numpy as np
import pytest

from dpfair_analysis.cli import main
from dpfair_analysis.testing import MechanismError, assert_sensitivity, audit, audit_step
from dpfair_analysis.testing.auditing import Budget
from dpfair_analysis.testing.sensitivity import distance

SMALL = Budget("test", screen=200, select=1_000, evaluate=2_000, top=2, max_pairs=4, batch_factors=(1, 1, 1))


def exact_imaginary(data, rng):
    """Real part: pure noise; imaginary part: the exact sum (epsilon = infinity)."""
    return complex(rng.laplace(), float(np.sum(data)))


@pytest.mark.parametrize("fn", [
    exact_imaginary,
    lambda data, rng: np.complex128(rng.laplace() + 1j * float(np.sum(data))),
    lambda data, rng: rng.laplace(size=2) + 1j * float(np.sum(data)),
    lambda data, rng: [rng.laplace(), np.complex64(1j * float(np.sum(data)))],
    lambda data, rng: np.array([rng.laplace()], dtype=complex),  # a complex type, even with 0j: refused by type
], ids=["python", "numpy-scalar", "array", "list-entry", "zero-imaginary"])
def test_a_complex_output_is_refused_by_name_without_a_warning(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # before: a ComplexWarning, and the real part audited
        with pytest.raises(MechanismError, match="returned complex output"):
            audit(fn, 1.0, relation="add-remove", budget=SMALL)


def test_a_batched_complex_output_is_refused():
    def batched(data, rng, n):
        return rng.laplace(size=(n, 2)) + 1j * float(np.sum(data))

    with pytest.raises(MechanismError, match="returned complex output"):
        audit(batched, 1.0, relation="add-remove", budget=SMALL, batched=True)


def test_the_cli_refuses_a_complex_release_with_status_2(tmp_path, capsys):
    path = tmp_path / "fourier.py"
    path.write_text(textwrap.dedent('''
        import numpy as np

        def fourier_hist(data, rng):
            hist = np.bincount(np.clip(np.asarray(data, int), 0, 3), minlength=4).astype(float)
            return hist + rng.laplace(0.0, 1.0, size=4) + 1j * hist
    '''))
    status = main(["audit", "--target", f"{path}:fourier_hist", "--epsilon", "1", "--relation", "add-remove",
                   "--trials", "2000"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "returned complex output" in err[0]  # before: 0, consistent


def test_sensitivity_checks_refuse_a_complex_release():
    with pytest.raises(ValueError, match="release_fn returned a complex value"):
        assert_sensitivity(lambda d: complex(0.0, float(np.sum(d))), 0.5, relation="add-remove", norm=1,
                           data=np.linspace(-1, 1, 4), examples=10, seed=0)
    with pytest.raises(ValueError, match="complex"):
        distance(np.array([1j]), np.array([0j]), 1)


def test_audit_step_refuses_a_complex_trajectory():
    def train(data, rng):
        theta = np.zeros((2, data.shape[1]), dtype=complex)
        theta[1] = rng.normal(size=data.shape[1]) + 1j * data.sum(axis=0)
        return theta

    with pytest.raises(MechanismError, match="complex"):
        audit_step(train, data=np.zeros((3, 2)), canary=np.array([1.0, 0.0]), delta=1e-5, epsilon=1.0,
                   budget="smoke")
