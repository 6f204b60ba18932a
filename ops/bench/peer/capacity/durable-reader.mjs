// Hosted runs on the Durable Streams reference server, for ops/bench/capacity.py:
// this process reads each run's upstream agent and appends every event to the
// run's JSON stream with the protocol's own IdempotentProducer (batched while
// a request is in flight, exactly once), then closes the stream. Followers
// read the server itself (`?offset=-1&live=sse`).
//
//   node durable-reader.mjs PORT DURABLE_STREAMS_URL UPSTREAM_URL
//
//   POST /runs/ID   body: the run's RunAgentInput, sent to the upstream as is.
//                   Creates DURABLE_STREAMS_URL/runs/ID, 201, then reads on.
//   GET  /stats     {"rss", "active", "failures", "lastFailures"}
//   GET  /end       abandons every run still being read or flushed (between trials)
//
// Prints "ready" once it listens.
import http from "node:http"
import { DurableStream, IdempotentProducer } from "@durable-streams/client"

const [port, durableUrl, upstreamUrl] = process.argv.slice(2)
let failures = 0
const lastFailures = []
const active = new Set() // AbortControllers of the runs being read or flushed
function failed(error) {
  failures += 1
  lastFailures.push(String(error))
  if (lastFailures.length > 5) lastFailures.shift()
}

function* sseData(text) {
  // Each complete SSE event's data (AG-UI events are one `data:` line each).
  for (const block of text) {
    const lines = block.split("\n").filter((line) => line.startsWith("data:"))
    if (lines.length) yield lines.map((line) => line.slice(line[5] === " " ? 6 : 5)).join("\n")
  }
}

async function drive(runId, stream, body) {
  const abort = new AbortController()
  active.add(abort)
  const { signal } = abort
  const producer = new IdempotentProducer(stream, `reader-${runId}`, { onError: failed, signal })
  try {
    const response = await fetch(upstreamUrl, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body,
      signal,
    })
    const decoder = new TextDecoder()
    let buffer = ""
    for await (const bytes of response.body) {
      buffer += decoder.decode(bytes, { stream: true })
      const blocks = buffer.split("\n\n")
      buffer = blocks.pop()
      for (const data of sseData(blocks)) producer.append(data)
    }
    await producer.close()
  } catch (error) {
    if (!signal.aborted) failed(error)
  } finally {
    active.delete(abort)
  }
}

async function readBody(req) {
  const parts = []
  for await (const part of req) parts.push(part)
  return Buffer.concat(parts).toString()
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, "http://x")
  const match = url.pathname.match(/^\/runs\/([^/]+)$/)
  try {
    if (req.method === "POST" && match) {
      const body = await readBody(req)
      const stream = await DurableStream.create({
        url: `${durableUrl}/runs/${match[1]}`,
        contentType: "application/json",
      })
      drive(match[1], stream, body)
      res.writeHead(201, { "content-type": "application/json" })
      res.end(JSON.stringify({ run_id: match[1], started: true }))
    } else if (req.method === "GET" && url.pathname === "/stats") {
      res.writeHead(200, { "content-type": "application/json" })
      const rss = process.memoryUsage().rss
      res.end(JSON.stringify({ rss, active: active.size, failures, lastFailures }))
    } else if (req.method === "GET" && url.pathname === "/end") {
      for (const abort of active) abort.abort()
      res.writeHead(200).end("{}")
    } else {
      res.writeHead(404).end()
    }
  } catch (error) {
    failed(error)
    if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" })
    res.end(String(error))
  }
})
server.keepAliveTimeout = 60_000
server.listen(Number(port), "127.0.0.1", () => console.log("ready"))
