"""The Durable Streams protocol (PROTOCOL.md of electric-sql/durable-streams) over the log.

A stream is a run: `/v1/stream/{name}` and `/v1/runs/{name}` are one log
whenever the name is a valid run id. `offsets`, `bodies`, `sse`, `headers`
and `cursor` are pure encodings; `protocol` applies the rules to the log's
`StreamStore` and the stream hub; the HTTP edge is `agent_replay.api.durable`.
"""
