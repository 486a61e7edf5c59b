"""The lines said at a run's end: events read and their rate, what each endpoint got, what was left out."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamer.run.pipeline import RunResult

if TYPE_CHECKING:
    from _typeshed import SupportsWrite


def print_summary(result: RunResult, stream: SupportsWrite[str], *, bad_lines: int = 0) -> None:
    rate = result.events / result.seconds if result.seconds > 0 else 0.0
    stream.write(f"streamer: {result.events:,} events read in {result.seconds:.2f} s ({rate:,.0f} events/s)\n")
    for name, delivered, failed in result.delivered:
        state = f"FAILED: {failed}" if failed else "ok"
        lost = result.undelivered.get(name, [])
        arrived = max(delivered - sum(count for count, _ in lost), 0)
        state += "".join(f" · {count:,} {what}" for count, what in lost)
        stream.write(f"  {arrived:>10,} -> {name}  {state}\n")
    if bad_lines:
        stream.write(f"streamer: {bad_lines:,} malformed line(s) skipped "
                     "(see messages above; --strict stops at the first)\n")
    dropped = {reason: count for reason, count in result.dropped.items() if not (bad_lines and reason == "bad_line")}
    if dropped:  # (malformed lines were said just above)
        reasons = ", ".join(f"{reason} {count:,}" for reason, count in sorted(dropped.items()))
        stream.write(f"streamer: {sum(dropped.values()):,} input(s) left out or cut short ({reasons}): "
                     "see the warnings above\n")
