"""Typewriter benchmark: the incremental decoder against re-parsing after every delta.

    python ops/bench/typewriter.py [--bytes 1000000] [--step 20] [--samples 40] [--json FILE]

One file-writing tool call, `{"filePath": ..., "content": <code with quotes,
line breaks and non-ASCII>}` (about --bytes of JSON text), streamed `--step`
characters per delta. Printed, in one run:

* decoder: `agent_replay.projector.typewriter.Decoder` fed every delta (measured
  whole), its throughput, and a check that its output is the decoded content;
* re-parse (the seed's method): accumulate, parse the whole text so far with
  PyPI `partial-json-parser` after each delta, print the suffix past what was
  printed;
* re-parse (TanStack's): the same with the projector's port of the
  `partial-json` parser TanStack uses for `TOOL_CALL_ARGS`.

Both re-parse methods cost the whole accumulated text per delta (quadratic),
far too slow to run 50,000 times on a megabyte; their totals are estimated
from `--samples` deltas evenly spaced through the stream (each timed on the
real accumulated prefix, the mean times the number of deltas: a Riemann sum
of a cost that grows with the prefix), unless `--full`. The estimate counts
the parses only, not the accumulation, so it understates the baselines;
`--check-estimate` first runs both ways at a small size to show by how much.
Not a test.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from partial_json_parser import loads as pjp_loads  # noqa: E402

from agent_replay.projector.partial_json import NO_VALUE, parse_partial  # noqa: E402
from agent_replay.projector.typewriter import Decoder  # noqa: E402

LINE = '    const label = "näive \\ value"; // a line of a file, written by a tool ✓\n'


def argument(size: int) -> tuple[str, str]:
    """About `size` characters of JSON text, and the content string it carries."""
    escaped = len(json.dumps(LINE)) - 2
    length = max(0, size - 40) * len(LINE) // escaped
    content = (LINE * (length // len(LINE) + 1))[:length]
    return json.dumps({"filePath": "src/App.tsx", "content": content}), content


def split(text: str, step: int) -> list[str]:
    return [text[i : i + step] for i in range(0, len(text), step)]


def run_decoder(deltas: list[str]) -> tuple[float, str]:
    out: list[str] = []
    decoder = Decoder()
    start = time.perf_counter()
    for delta in deltas:
        for piece in decoder.feed(delta):
            if piece.path == "/content" and piece.text:
                out.append(piece.text)
    decoder.finish()
    return time.perf_counter() - start, "".join(out)


def pjp(text: str) -> Any:
    try:
        return pjp_loads(text)
    except Exception:
        return None


def tanstack(text: str) -> Any:
    value = parse_partial(text)
    return None if value is NO_VALUE else value


def reparse_step(parse: Callable[[str], Any], accumulated: str, printed: int) -> tuple[str, int]:
    """The seed's loop body: parse everything so far, print past `printed`."""
    value = parse(accumulated)
    content = value.get("content") if isinstance(value, dict) else None
    if not isinstance(content, str):
        return "", printed
    return content[printed:], max(printed, len(content))


def reparse_full(parse: Callable[[str], Any], deltas: list[str]) -> tuple[float, str]:
    out: list[str] = []
    accumulated, printed = "", 0
    start = time.perf_counter()
    for delta in deltas:
        accumulated += delta
        new, printed = reparse_step(parse, accumulated, printed)
        out.append(new)
    return time.perf_counter() - start, "".join(out)


def reparse_estimate(parse: Callable[[str], Any], deltas: list[str], samples: int) -> float:
    """Total seconds for every delta, from `samples` of them timed on their real prefix."""
    n = len(deltas)
    ends = [0]
    for delta in deltas:
        ends.append(ends[-1] + len(delta))
    text = "".join(deltas)
    picks = sorted({min(n, round((k + 0.5) * n / samples)) for k in range(samples)})
    spent = 0.0
    for i in picks:
        prefix = text[: ends[i]]
        start = time.perf_counter()
        reparse_step(parse, prefix, 0)
        spent += time.perf_counter() - start
    return spent / len(picks) * n


def check_estimate(step: int, samples: int) -> dict[str, Any]:
    text, _ = argument(20_000)
    deltas = split(text, step)
    full, _ = reparse_full(tanstack, deltas)
    estimate = reparse_estimate(tanstack, deltas, samples)
    return {"bytes": len(text), "full_s": full, "estimated_s": estimate}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bytes", type=int, default=1_000_000, help="argument size (JSON text)")
    parser.add_argument("--step", type=int, default=20, help="characters per delta")
    parser.add_argument("--samples", type=int, default=40, help="re-parses timed per baseline")
    parser.add_argument("--full", action="store_true", help="run the re-parse baselines whole")
    parser.add_argument("--check-estimate", action="store_true")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()

    report: dict[str, Any] = {"bytes": args.bytes, "step": args.step}
    if args.check_estimate:
        check = check_estimate(args.step, args.samples)
        report["estimate_check"] = check
        print(
            f"estimate check at {check['bytes']:,} B: full {check['full_s']:.3f} s, "
            f"estimated {check['estimated_s']:.3f} s"
        )

    text, content = argument(args.bytes)
    deltas = split(text, args.step)
    report["argument_chars"] = len(text)
    report["deltas"] = len(deltas)
    print(f"argument: {len(text):,} characters in {len(deltas):,} deltas of {args.step}")

    seconds, typed = run_decoder(deltas)
    if typed != content:
        print("decoder output differs from the decoded content", file=sys.stderr)
        return 1
    report["decoder_s"] = seconds
    print(f"decoder:               {seconds:9.3f} s  ({len(text) / seconds / 1e6:.2f} M chars/s)")

    for name, parse in (("seed_partial_json_parser", pjp), ("tanstack_partial_json", tanstack)):
        if args.full:
            total, out = reparse_full(parse, deltas)
            if out != content:
                print(f"{name}: output differs from the decoded content", file=sys.stderr)
            how = "measured"
        else:
            total = reparse_estimate(parse, deltas, args.samples)
            how = f"estimated from {args.samples} timed re-parses"
        report[f"{name}_s"] = total
        report[f"{name}_ratio"] = total / seconds
        report[f"{name}_how"] = how
        print(f"re-parse ({name}): {total:11.1f} s  {total / seconds:10,.0f}x the decoder ({how})")

    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
