"""The fair-gap release's privacy claims as tests (the kit's pytest plugin: @pytest.mark.dp and the dp fixture)."""
import pytest
from fair_gap import DATA, claimed_sensitivity, counts, gap, private_gap_fixed, private_gap_wrong

from dpfair_analysis.testing import PrivacyViolation, SensitivityViolation


@pytest.mark.dp(epsilon=1.0, relation="attribute-change")
def test_the_plausible_claim_is_wrong(dp):
    with pytest.raises(SensitivityViolation):
        dp.assert_sensitivity(gap, claimed_sensitivity, mechanism="laplace")
    with pytest.raises(PrivacyViolation):
        dp.assert_private(private_gap_wrong, data=DATA)


@pytest.mark.dp(epsilon=1.0, relation="attribute-change")
def test_the_fixed_release_is_private(dp):
    dp.assert_sensitivity(counts, 4.0, mechanism="laplace")
    dp.assert_private(private_gap_fixed, data=DATA, require_power=True)
