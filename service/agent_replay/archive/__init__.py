"""The offline format: export files (JSON Lines) written from the log, read
back with full validation, and imported all-or-nothing.

    {"format":"agent-replay.export","version":1,"runs":[{run...}, ...]}
    {"run_id":"r1","seq":1,"received_at":"2026-...+00:00","chunk":{...as stored...}}
    ...

The first line describes the runs (ids, thread, status, timestamps, input,
metadata); then each run's events in seq order, the chunk spliced in exactly
as the log stores it (never decoded and re-encoded).
"""
