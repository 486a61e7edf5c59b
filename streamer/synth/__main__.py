"""`python -m streamer.synth OUT --jobs N --scenario NAME[,NAME] --seed S`."""

from __future__ import annotations

import argparse
import sys

from streamer.synth.generate import generate
from streamer.synth.spec import SCENARIOS


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m streamer.synth", description=__doc__)
    ap.add_argument("out", help="directory to create (the workflow's submit dir)")
    ap.add_argument("--jobs", type=int, default=10, help="number of compute jobs")
    ap.add_argument("--scenario", default="success",
                    help=f"comma-separated, from: {', '.join(SCENARIOS)}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--label", default="synth", help="workflow label (dag is LABEL-0.dag)")
    args = ap.parse_args(argv)
    try:
        path = generate(args.out, jobs=args.jobs, scenario=args.scenario, seed=args.seed, label=args.label)
    except (ValueError, FileExistsError) as exc:
        ap.error(str(exc))
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
