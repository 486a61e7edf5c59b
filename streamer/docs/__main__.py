"""`python -m streamer.docs [--out DIR]`: write docs/reference/ from the code's declarations."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from streamer.docs.reference import PAGES, write


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m streamer.docs",
        description="Write the reference pages (" + ", ".join(PAGES) + ") from the code's own declarations: "
                    "endpoint options, the event schema, exit codes, metrics. Run it in the repository root "
                    "after changing any of them, and commit docs/reference/ (tests/docs checks it is current).")
    parser.add_argument("--out", type=Path, default=Path("docs/reference"),
                        help="directory to write into (default: docs/reference)")
    args = parser.parse_args(argv)
    try:
        for path in write(args.out):
            print(path)
    except OSError as exc:
        sys.stderr.write(f"python -m streamer.docs: error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
