// Hosted runs the way Vercel's resumable-stream README shows them, for
// ops/bench/capacity.py: the producer reads the upstream agent, keeps its
// chunks and answers followers over Redis pub/sub.
//
//   node resumable.mjs PORT UPSTREAM_URL REDIS_URL KEY_PREFIX
//
//   POST /runs/ID          body: the run's RunAgentInput, sent to the upstream as is.
//                          createNewResumableStream(ID, upstream); the response stream
//                          is dropped at once (a caller that went away: the producer
//                          still reads the upstream to its end), 201.
//   GET  /runs/ID/stream   resumeExistingStream(ID, ?resumeAt): the run's SSE from its
//                          start (or that many characters on), live until it ends.
//   GET  /stats            {"rss", "redisUsedMemory", "active", "failures", "lastFailures"}
//
// Prints "ready" once it listens. On SIGTERM it deletes its KEY_PREFIX keys.
import http from "node:http"
import { createClient } from "redis"
import { createResumableStreamContext } from "resumable-stream"

const [port, upstreamUrl, redisUrl, keyPrefix] = process.argv.slice(2)
let failures = 0
const lastFailures = []
let active = 0 // runs whose producer still reads its upstream
function failed(error) {
  failures += 1
  lastFailures.push(String(error))
  if (lastFailures.length > 5) lastFailures.shift()
}
const publisher = createClient({ url: redisUrl })
const subscriber = createClient({ url: redisUrl })
await Promise.all([publisher.connect(), subscriber.connect()])
const context = createResumableStreamContext({
  keyPrefix,
  publisher,
  subscriber,
  // A long-lived server: nothing to keep alive past the response.
  waitUntil: (promise) => promise.catch(failed),
})

function fromUpstream(body) {
  // A ReadableStream<string> of the upstream's SSE, network read by network read.
  return new ReadableStream({
    async start(controller) {
      active += 1
      try {
        const response = await fetch(upstreamUrl, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "text/event-stream" },
          body,
        })
        const decoder = new TextDecoder()
        for await (const bytes of response.body) {
          controller.enqueue(decoder.decode(bytes, { stream: true }))
        }
        controller.close()
      } catch (error) {
        // Ended, not errored: the library reads its source without a catch, and a
        // rejected read would take the whole process down.
        failed(error)
        controller.close()
      } finally {
        active -= 1
      }
    },
  })
}

async function readBody(req) {
  const parts = []
  for await (const part of req) parts.push(part)
  return Buffer.concat(parts).toString()
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, "http://x")
  const match = url.pathname.match(/^\/runs\/([^/]+)(\/stream)?$/)
  try {
    if (req.method === "POST" && match && !match[2]) {
      const body = await readBody(req)
      const stream = await context.createNewResumableStream(match[1], () => fromUpstream(body))
      await stream.cancel()
      res.writeHead(201, { "content-type": "application/json" })
      res.end(JSON.stringify({ run_id: match[1], started: true }))
    } else if (req.method === "GET" && match && match[2]) {
      const resumeAt = url.searchParams.get("resumeAt")
      const stream = await context.resumeExistingStream(
        match[1],
        resumeAt ? Number(resumeAt) : undefined,
      )
      if (!stream) {
        res.writeHead(stream === null ? 422 : 404).end()
        return
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" })
      const reader = stream.getReader()
      req.on("close", () => reader.cancel().catch(() => {}))
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        res.write(value)
      }
      res.end()
    } else if (req.method === "GET" && url.pathname === "/stats") {
      const info = await publisher.info("memory")
      const used = Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0)
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify({
        rss: process.memoryUsage().rss, redisUsedMemory: used, active, failures, lastFailures,
      }))
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

process.on("SIGTERM", async () => {
  server.close()
  try {
    const keys = []
    for await (const key of publisher.scanIterator({ MATCH: `${keyPrefix}*`, COUNT: 1000 })) {
      keys.push(key)
    }
    for (let i = 0; i < keys.length; i += 1000) await publisher.del(keys.slice(i, i + 1000))
  } finally {
    process.exit(0)
  }
})
