"""``dpfair verify``: run the claims registry (verify/claims/) and print verdicts."""

from __future__ import annotations

import argparse

from dpfair_analysis.cli._common import UsageError, print_json, show_progress


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check the papers' theorems, bounds and privacy statements",
                       description="Run the check of every registered claim of the five papers (searches, Monte "
                                   "Carlo, exact comparisons on the toolkit's own code) and print its verdict: "
                                   "holds (with the worst ratio seen), violated (with the factor by which a "
                                   "shrunk counterexample breaks it) or inconclusive.")
    p.add_argument("--paper", default=None, help="only this paper's claims: 000, 001, 002, 003 or 004")
    p.add_argument("--claim", default=None, help="only this claim id (e.g. 001.thm1)")
    p.add_argument("--budget", default="quick", help="quick (default, about 30 s here) or full (larger searches)")
    p.add_argument("--json", action="store_true", help='print {"claims": [{id, paper, statement, verdict, evidence}]}')
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--list", action="store_true", help="list the claims (id, paper, location, statement) and stop")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> None:
    from dpfair_analysis.verify.claims import BUDGETS, PAPERS, claims_for, get_claim, run_claims

    if args.budget not in BUDGETS:
        raise UsageError(f"--budget must be one of {sorted(BUDGETS)}, got {args.budget!r}")
    if args.paper is not None and args.paper not in PAPERS:
        raise UsageError(f"--paper must be one of {sorted(PAPERS)}, got {args.paper!r}")
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
            print_json({"claims": [{"id": c.id, "paper": c.paper, "location": c.location, "statement": c.statement,
                                    "assumptions": c.assumptions, "corrects": c.corrects} for c in claims]})
        else:
            for c in claims:
                print(f"{c.id:<44} {c.location}")
                print(f"{'':<44} {c.statement}")
        return
    results = run_claims(claims, BUDGETS[args.budget], progress=show_progress(args))
    if args.json:
        print_json({"claims": [{"id": c.id, "paper": c.paper, "location": c.location, "statement": c.statement,
                                "assumptions": c.assumptions, "corrects": c.corrects, "verdict": v.status,
                                "evidence": v.evidence(), "seconds": round(s, 3)} for c, v, s in results]})
        return
    print(f"{'id':<32} {'paper':<5} {'verdict':<12} {'key number':<14} statement / evidence")
    for c, v, _ in results:
        key = (f"×{v.ratio:.3g}" if v.status == "violated" and v.ratio is not None else
               f"worst {v.worst_ratio:.3g}" if v.status == "holds" and v.worst_ratio is not None else "")
        statement = c.statement if len(c.statement) <= 90 else c.statement[:87] + "..."
        print(f"{c.id:<32} {c.paper:<5} {v.status:<12} {key:<14} {statement}")
        print(f"{'':<66}  → {v.key if v.status != 'inconclusive' else v.reason}")
    counts = {s: sum(v.status == s for _, v, _ in results) for s in ("holds", "violated", "inconclusive")}
    print(f"({len(results)} claims, budget {args.budget}: {counts['holds']} hold, {counts['violated']} violated, "
          f"{counts['inconclusive']} inconclusive)")
