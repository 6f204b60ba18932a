// @durable-streams/client against two replicas of the service (tests/durable/test_client_replicas.py).
//   node replicas.mjs URL_A URL_B NAME  -> one JSON summary line on stdout
// An idempotent producer writes through replica A while its connection is cut once after
// the server committed (the retry must be a duplicate, not a second copy); one reader on A
// is killed mid-stream and resumes from its last offset on replica B; two readers on B tail
// live, one with SSE and one with long-poll, until the producer closes the stream.
import {
  DurableStream,
  IdempotentProducer,
  createFetchWithBackoff,
  stream,
} from "@durable-streams/client"

const [baseA, baseB, name] = process.argv.slice(2)
const urlA = `${baseA}/v1/stream/${name}`
const urlB = `${baseB}/v1/stream/${name}`
const TOTAL = 300
const KILL_AFTER = 60
const deadline = (ms, what) =>
  new Promise((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms).unref())

function collector(label, res) {
  const items = []
  let closedSeen = false
  let lastOffset = null
  const done = new Promise((resolve, reject) => {
    res.subscribeJson(async (batch) => {
      items.push(...batch.items)
      lastOffset = batch.offset
      if (batch.streamClosed) {
        closedSeen = true
        resolve()
      }
    })
    res.closed.then(resolve, reject)
  })
  return {
    label,
    items,
    done,
    get closed() {
      return closedSeen
    },
    get offset() {
      return lastOffset
    },
  }
}

const handle = await DurableStream.create({ url: urlA, contentType: "application/json" })

// Live readers on replica B, joined before anything is written.
const sse = collector("sse", await stream({ url: urlB, offset: "-1", live: "sse" }))
const longPoll = collector("long-poll", await stream({ url: urlB, offset: "-1", live: "long-poll" }))

// A reader on A that is killed once it has KILL_AFTER messages, then resumes on B.
const killed = { items: [], offset: null }
const first = await stream({ url: urlA, offset: "-1", live: "sse" })
const killedDone = new Promise((resolve) => {
  first.subscribeJson(async (batch) => {
    if (killed.items.length >= KILL_AFTER) return
    killed.items.push(...batch.items)
    killed.offset = batch.offset
    if (killed.items.length >= KILL_AFTER) {
      first.cancel(new Error("connection killed by the test"))
      resolve()
    }
  })
})

// The producer's connection to A drops once, after the server committed its batch.
let posts = 0
let drops = 0
const flaky = async (input, init) => {
  const response = await fetch(input, init)
  if ((init?.method ?? "GET") === "POST" && ++posts === 4) {
    drops += 1
    await response.body?.cancel()
    throw new TypeError("connection reset (simulated, after the server answered)")
  }
  return response
}
const errors = []
const producer = new IdempotentProducer(handle, "replicas-producer", {
  fetch: createFetchWithBackoff(flaky, { initialDelay: 10, maxDelay: 100, multiplier: 2 }),
  lingerMs: 2,
  maxInFlight: 1,
  onError: (err) => errors.push(String(err)),
})
for (let i = 0; i < TOTAL; i++) {
  producer.append(JSON.stringify({ i }))
  if (i % 25 === 24) {
    await producer.flush()
    await new Promise((r) => setTimeout(r, 15)) // readers are live, not catching up
  }
}
await producer.flush()

await Promise.race([killedDone, deadline(20_000, "the killed reader's first part")])
const resumed = collector(
  "resumed",
  await stream({ url: urlB, offset: killed.offset, live: "long-poll" })
)

await producer.close()
await Promise.race([
  Promise.all([sse.done, longPoll.done, resumed.done]),
  deadline(30_000, "live readers to see the stream close"),
])

const catchUpA = await (await fetch(`${urlA}?offset=-1`)).json()
const catchUpB = await (await fetch(`${urlB}?offset=-1`)).json()
const head = await fetch(urlB, { method: "HEAD" })
const ids = (items) => items.map((m) => m.i)
console.log(
  JSON.stringify({
    total: TOTAL,
    drops,
    errors,
    sse: { ids: ids(sse.items), closed: sse.closed },
    longPoll: { ids: ids(longPoll.items), closed: longPoll.closed },
    killed: { ids: ids(killed.items), offset: killed.offset },
    resumed: { ids: ids(resumed.items), closed: resumed.closed },
    catchUpA: ids(catchUpA),
    catchUpB: ids(catchUpB),
    headClosed: head.headers.get("stream-closed"),
  })
)
process.exit(0)
