"""``dpfair verify``: run the claims registry (verify/claims/) and print verdicts, or explain one claim."""

from __future__ import annotations

import argparse

from dpfair_analysis.cli._common import UsageError, print_json, show_progress


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check the papers' theorems, bounds and privacy statements",
                       description="Run the check of every registered claim of the five papers, and of two later ones "
                                   "(005 Global-Adapt, 006 bounded adaptive clipping; marked ‡) (searches, Monte "
                                   "Carlo, exact comparisons on the toolkit's own code) and print its verdict: "
                                   "holds (with the worst ratio seen), violated (false as stated, with the factor by "
                                   "which a counterexample at reachable parameters breaks it), misprinted (false as "
                                   "printed, true after the named typo fix, which does not change what is "
                                   "guaranteed; both forms tested) or inconclusive. A claim that holds while a "
                                   "premise its proof uses is violated is counted apart: 'holds, but rests on "
                                   "violated premises' (marked †); where the paper's words admit another reading, "
                                   "that reading's verdict is printed beside (↔).")
    p.add_argument("--paper", default=None,
                   help="only this paper's claims: 000, 001, 002, 003, 004, or the later 005, 006")
    p.add_argument("--claim", default=None, help="only this claim id (e.g. 001.thm1)")
    p.add_argument("--explain", default=None, metavar="CLAIM",
                   help="one claim in full: the statement as printed (quote), where, what the check does, the verdict "
                        "with its counterexample or worst ratio, the fix and the corrected form")
    p.add_argument("--budget", default="quick", help="quick (default, about 30 s here) or full (larger searches)")
    p.add_argument("--json", action="store_true", help='print {"claims": [{id, paper, kind, statement, verdict, '
                                                       'standing, rests_on, readings, evidence, ...}], "counts"} '
                                                       '(with --explain: the explanation\'s fields)')
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--list", action="store_true", help="list the claims (id, paper, kind, location, statement) and stop")
    p.set_defaults(handler=run)


def _claim_row(c) -> dict:
    return {"id": c.id, "paper": c.paper, "later_work": c.later_work, "kind": c.kind, "location": c.location,
            "quote": c.quote, "statement": c.statement, "regime": c.regime, "fix": c.fix, "corrects": c.corrects, "extends": c.extends,
            "rests_on": list(c.rests_on), "reading": c.reading, "readings": [r.name for r in c.readings]}


def _check_names(args: argparse.Namespace) -> None:
    """--budget, --paper, --claim and --explain against the static table of names (:mod:`dpfair_analysis.names`),
    before the claims registry is imported (it builds every claim); once it is imported, run() checks against it."""
    from dpfair_analysis import names

    if args.budget not in names.VERIFY_BUDGETS:
        raise UsageError(f"--budget must be one of {sorted(names.VERIFY_BUDGETS)}, got {args.budget!r}")
    if args.paper is not None and args.paper not in names.CLAIM_PAPERS:
        raise UsageError(f"--paper must be one of {sorted(names.CLAIM_PAPERS)}, got {args.paper!r}")
    if args.claim is not None and args.claim not in names.CLAIMS:
        raise UsageError(f"unknown --claim {args.claim!r} (list them with: dpfair verify --list)")
    if args.explain is not None and args.explain not in names.CLAIMS:
        raise UsageError(f"--explain: unknown claim {args.explain!r}; known: {', '.join(names.CLAIMS)}")


def run(args: argparse.Namespace) -> None:
    import sys

    if "dpfair_analysis.verify.claims" not in sys.modules:
        _check_names(args)
    from dpfair_analysis.verify.claims import (
        BUDGETS,
        CLAIMS,
        PAPERS,
        claims_for,
        count_later_work,
        count_verdicts,
        explain,
        format_alternatives,
        format_counts,
        format_explanation,
        format_premises,
        get_claim,
        run_claims,
    )

    if args.budget not in BUDGETS:
        raise UsageError(f"--budget must be one of {sorted(BUDGETS)}, got {args.budget!r}")
    if args.paper is not None and args.paper not in PAPERS:
        raise UsageError(f"--paper must be one of {sorted(PAPERS)}, got {args.paper!r}")
    if args.explain is not None:
        if args.claim is not None or args.paper is not None or args.list:
            raise UsageError("--explain takes one claim and no --claim, --paper or --list")
        if args.explain not in {c.id for c in CLAIMS}:
            raise UsageError(f"--explain: unknown claim {args.explain!r}; known: {', '.join(c.id for c in CLAIMS)}")
        info = explain(args.explain, BUDGETS[args.budget])
        if args.json:
            print_json(info)
        else:
            print(format_explanation(info))
        return
    if args.claim is not None:
        try:
            claims = [get_claim(args.claim)]
        except ValueError:
            raise UsageError(f"unknown --claim {args.claim!r} (list them with: dpfair verify --list)") \
                from None
        if args.paper is not None and claims[0].paper != args.paper:
            raise UsageError(f"claim {args.claim!r} belongs to paper {claims[0].paper}, not {args.paper}")
    else:
        claims = claims_for(args.paper)
    if args.list:
        if args.json:
            print_json({"claims": [_claim_row(c) for c in claims]})
        else:
            for c in claims:
                print(f"{c.id:<44} {c.kind:<10} {c.location}")
                print(f"{'':<55} {c.statement}")
        return
    results = run_claims(claims, BUDGETS[args.budget], progress=show_progress(args))
    counts = count_verdicts(results)
    if args.json:
        print_json({"claims": [{**_claim_row(c), "verdict": v.status, "standing": v.standing,
                                "evidence": v.evidence(), "seconds": round(s, 3)} for c, v, s in results],
                    "counts": counts, "counts_later_work": count_later_work(results)})
        return
    print(f"{'id':<38} {'kind':<10} {'verdict':<12} {'key number':<14} statement / evidence")
    for c, v, _ in results:
        statement = c.statement if len(c.statement) <= 80 else c.statement[:77] + "..."
        verdict = v.status + ("†" if v.standing != v.status else "")
        print(f"{c.id + ('‡' if c.later_work else ''):<38} {c.kind:<10} {verdict:<12} {v.key_number:<14} {statement}")
        print(f"{'':<76}  → {v.key if v.status != 'inconclusive' else v.reason}")
        if v.standing != v.status:
            print(f"{'':<76}  † {v.standing_label}: {format_premises(v)}")
        if v.alternatives:
            print(f"{'':<76}  ↔ read as {c.reading}; other reading {format_alternatives(v)}")
    later = [c for c, _, _ in results if c.later_work]
    later_note = (f"; ‡ later work ({len(later)} claims of {', '.join(sorted({c.paper for c in later}))}: "
                  f"{format_counts(count_later_work(results))})") if later else ""
    print(f"({len(results)} claims, budget {args.budget}: {format_counts(counts)}"
          f"; † holds, but rests on violated premises{later_note}; dpfair verify --explain ID for one in full)")
