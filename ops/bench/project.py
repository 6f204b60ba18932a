"""Projector benchmark: batch and live-tail projection against the reference.

    python ops/bench/project.py [--chunks 100000] [--keep FILE] [--json FILE]

Generates a realistic agent run (an agent loop of several turns: reasoning,
text, tool calls whose arguments stream 20 characters per delta into 50 KB
each, like a file-writing tool, tool results, a structured output at the
end), writes it as JSONL, and prints in one run:

* batch: ``project(chunks)`` chunks/s, and its peak memory (tracemalloc,
  in a separate pass so tracing does not slow the timed one);
* incremental: ``Projector.apply`` + reading ``.messages`` after every chunk,
  as a live tail does (without serializing);
* reference: the same file through ``@tanstack/ai`` 0.58.0's StreamProcessor
  driven as ChatClient drives it (ops/bench/node/replay.mjs, processing
  time only), and the ratios.

Chunks are parsed before any clock starts, in all three. Not a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agent_replay.projector import Projector, project  # noqa: E402
from ops.bench.common import write_json  # noqa: E402

NODE_DIR = Path(__file__).resolve().parent / "node"
ARGS_BYTES = 50_000
ARGS_STEP = 20
LINE = "    const value = compute(input, options); // keeps the bench realistic\n"


def file_arguments(index: int) -> str:
    body = (LINE * (ARGS_BYTES // len(LINE) + 1))[: ARGS_BYTES - 60]
    return json.dumps({"path": f"src/module_{index}.ts", "content": body})


def deltas(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def generate(target: int) -> list[dict[str, Any]]:
    """About ``target`` chunks: turns of reasoning, text and six file writes."""
    per_call = len(deltas(file_arguments(0), ARGS_STEP)) + 3
    turns = max(1, target // (6 * per_call + 700))
    chunks: list[dict[str, Any]] = []
    ts = 1_764_322_200_000
    call = 0

    def add(chunk: dict[str, Any]) -> None:
        nonlocal ts
        ts += 3
        chunk["timestamp"] = ts
        chunks.append(chunk)

    for turn in range(turns):
        run, msg = f"run_{turn}", f"msg_{turn}"
        add({"type": "RUN_STARTED", "threadId": "thread_1", "runId": run})
        add({"type": "REASONING_START", "messageId": f"rsn_{turn}"})
        for piece in deltas("Let me think about which files to write next. " * 40, 8):
            add({"type": "REASONING_MESSAGE_CONTENT", "messageId": f"rsn_{turn}", "delta": piece})
        add({"type": "REASONING_END", "messageId": f"rsn_{turn}"})
        add({"type": "TEXT_MESSAGE_START", "messageId": msg, "role": "assistant"})
        for piece in deltas("I will now write the modules you asked for, one by one. " * 40, 5):
            add({"type": "TEXT_MESSAGE_CONTENT", "messageId": msg, "delta": piece})
        for _ in range(6):
            call_id = f"call_{call}"
            add(
                {
                    "type": "TOOL_CALL_START",
                    "toolCallId": call_id,
                    "toolCallName": "write_file",
                    "parentMessageId": msg,
                }
            )
            for piece in deltas(file_arguments(call), ARGS_STEP):
                add({"type": "TOOL_CALL_ARGS", "toolCallId": call_id, "delta": piece})
            add({"type": "TOOL_CALL_END", "toolCallId": call_id})
            add(
                {
                    "type": "TOOL_CALL_RESULT",
                    "toolCallId": call_id,
                    "messageId": f"res_{call}",
                    "content": '{"ok":true}',
                }
            )
            call += 1
        add({"type": "TEXT_MESSAGE_END", "messageId": msg})
        last = turn == turns - 1
        add(
            {
                "type": "RUN_FINISHED",
                "threadId": "thread_1",
                "runId": run,
                "finishReason": "stop" if last else "tool_calls",
            }
        )
    # A structured output closes the run.
    report = json.dumps(
        {"summary": "wrote files", "files": [f"src/module_{i}.ts" for i in range(call)], "ok": True}
    )
    add({"type": "RUN_STARTED", "threadId": "thread_1", "runId": "run_final"})
    # A closing text message pads the log to the target size.
    add({"type": "TEXT_MESSAGE_START", "messageId": "msg_summary", "role": "assistant"})
    filler = len(deltas(report, 6)) + 6
    for i in range(max(0, target - len(chunks) - filler)):
        add({"type": "TEXT_MESSAGE_CONTENT", "messageId": "msg_summary", "delta": f"word{i % 97} "})
    add({"type": "TEXT_MESSAGE_END", "messageId": "msg_summary"})
    add({"type": "CUSTOM", "name": "structured-output.start", "value": {"messageId": "msg_report"}})
    add({"type": "TEXT_MESSAGE_START", "messageId": "msg_report", "role": "assistant"})
    for piece in deltas(report, 6):
        add({"type": "TEXT_MESSAGE_CONTENT", "messageId": "msg_report", "delta": piece})
    add(
        {
            "type": "CUSTOM",
            "name": "structured-output.complete",
            "value": {"messageId": "msg_report", "object": json.loads(report), "raw": report},
        }
    )
    add(
        {
            "type": "RUN_FINISHED",
            "threadId": "thread_1",
            "runId": "run_final",
            "finishReason": "stop",
        }
    )
    return chunks


def timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def incremental(chunks: list[dict[str, Any]]) -> None:
    projector = Projector()
    for chunk in chunks:
        projector.apply(chunk)
        projector.messages  # noqa: B018 - a live tail reads the state after every chunk
    projector.finalize()
    projector.messages  # noqa: B018


def batch_peak_mb(chunks: list[dict[str, Any]]) -> float:
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    project(chunks)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return (peak - base) / 2**20


def reference(path: Path) -> dict[str, Any] | None:
    if not (NODE_DIR / "node_modules" / "@tanstack" / "ai").is_dir():
        install = ["npm", "ci"] if (NODE_DIR / "package-lock.json").exists() else ["npm", "install"]
        subprocess.run([*install, "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True)
    proc = subprocess.run(
        ["node", str(NODE_DIR / "replay.mjs"), "--bench", str(path)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        print(f"reference failed: {proc.stderr.strip()[:500]}", file=sys.stderr)
        return None
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--keep", type=Path, help="also write the generated log here")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()

    chunks = generate(args.chunks)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "run.jsonl"
        path.write_text("".join(json.dumps(c) + "\n" for c in chunks), "utf-8")
        size_mb = path.stat().st_size / 2**20
        n = len(chunks)
        print(f"log: {n} chunks, {size_mb:.1f} MB ({path if args.keep else 'temporary'})")

        batch_s = timed(lambda: project(chunks))
        peak = batch_peak_mb(chunks)
        print(f"batch:       {n / batch_s:>10,.0f} chunks/s  ({batch_s:.2f} s)")
        print(f"             peak {peak:.1f} MB allocated while projecting (tracemalloc)")
        inc_s = timed(lambda: incremental(chunks))
        print(
            f"incremental: {n / inc_s:>10,.0f} chunks/s  ({inc_s:.2f} s), messages read per chunk"
        )

        ref = reference(path)
    if ref is None:
        return 1
    ref_s = ref["seconds"]
    rss = ref["rssPeakMB"]
    print(f"reference:   {n / ref_s:>10,.0f} chunks/s  ({ref_s:.2f} s), node peak RSS {rss:.0f} MB")
    print(f"ratios: batch {ref_s / batch_s:.1f}x reference (goal >= 10x)")
    print(f"        incremental {ref_s / inc_s:.1f}x reference (goal >= 2x)")
    ok = ref_s / batch_s >= 10 and ref_s / inc_s >= 2 and peak < 200
    print("goals met" if ok else "GOALS NOT MET")
    write_json(
        args.json,
        {
            "chunks": n,
            "batch_chunks_per_s": n / batch_s,
            "batch_peak_mb": peak,
            "incremental_chunks_per_s": n / inc_s,
            "reference_chunks_per_s": n / ref_s,
            "reference_rss_peak_mb": rss,
            "batch_vs_reference": ref_s / batch_s,
            "incremental_vs_reference": ref_s / inc_s,
            "goals_met": ok,
        },
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
