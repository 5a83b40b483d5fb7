"""Opt-Q against Opacus (:mod:`dpfair_analysis.verify.opacus_optq`): the same step on the same draws, and what
Opacus's AdaClip accounts against what it releases."""


def test_matches_opacus_adaclip_step_by_step_on_full_batches():
    """Same model, same fixed-size batches, the same standard-normal draws fed to both, the fraction not
    clamped (as Opacus): the clip-bound trajectory agrees to 1e-12 and the parameters to float32 rounding
    over 60 steps (|S| = b, so Opacus's division by the actual batch size and the centred count coincide;
    see verify.opacus_optq.optq_vs_opacus)."""
    from dpfair_analysis.verify.opacus_optq import optq_vs_opacus

    frame = optq_vs_opacus(steps=60, sampling="shuffle", seed=0, clamp_fraction=False)
    assert len(frame) == 60
    assert frame["clip_rel_diff"].max() < 1e-12
    assert frame["param_max_abs_diff"].max() < 1e-5
    assert frame["clip_ours"].max() / frame["clip_ours"].min() > 3  # the bound really moved
    assert (frame["fraction_ours"] - frame["fraction_opacus"]).abs().max() < 1e-12
    assert ((frame["fraction_ours"] < 0) | (frame["fraction_ours"] > 1)).any()  # the clamp would have mattered


def test_with_the_clamp_the_two_part_at_the_first_out_of_range_fraction():
    """TF Privacy's clamp to [0, 1] (our default) is the one difference on full batches: identical until the
    first step whose noisy fraction leaves [0, 1], different after."""
    from dpfair_analysis.verify.opacus_optq import optq_vs_opacus

    frame = optq_vs_opacus(steps=30, sampling="shuffle", seed=0, clamp_fraction=True)
    outside = ((frame["fraction_ours_unclamped"] < 0) | (frame["fraction_ours_unclamped"] > 1)).to_numpy()
    first = int(outside.argmax())
    assert outside.any()
    assert frame["clip_rel_diff"].iloc[:first].max() < 1e-12
    assert frame["clip_rel_diff"].iloc[first] > 1e-6


def test_opacus_differs_with_poisson_batches_only_through_its_denominator():
    """With Poisson batches Opacus divides by the batch's actual size |S| (private) and Andrew et al. by the
    expected b: given the same noisy counts the fractions differ by exactly that ratio, and nothing else."""
    from dpfair_analysis.verify.opacus_optq import optq_vs_opacus

    frame = optq_vs_opacus(steps=40, sampling="poisson", seed=1)
    assert (frame["batch_size"] != frame["expected_batch_size"]).any()
    # ours: (u - |S|/2 + noise)/b + 1/2;  Opacus: (u + noise)/|S|  =  (ours - 1/2) b/|S| + 1/2
    predicted = (frame["fraction_ours_unclamped"] - 0.5) * frame["expected_batch_size"] / frame["batch_size"] + 0.5
    assert (predicted - frame["fraction_opacus_same_counts"]).abs().max() < 1e-9
    assert (frame["fraction_ours_unclamped"] - frame["fraction_opacus_same_counts"]).abs().max() > 0.01


def test_opacus_accounts_less_than_it_releases():
    """Opacus's AdaClip accounts sigma (Theorem 1 for a centred count, multiplier 2 sigma_b) but noises the
    uncentred count (contribution 1, multiplier sigma_b): the released joint multiplier is below sigma, and
    the gap in epsilon grows as sigma_b = b/20 shrinks."""
    from dpfair_analysis.verify.opacus_optq import opacus_count_accounting

    table = opacus_count_accounting(((256, 1.0, 36177, 2827), (32, 1.0, 36177, 22611)))
    assert (table["joint_released"] < table["sigma"]).all()
    assert (table["epsilon_released"] > table["epsilon_accounted"]).all()
    gap = table["epsilon_released"] / table["epsilon_accounted"]
    assert gap.iloc[1] > 1.2 > 1.01 > gap.iloc[0]
