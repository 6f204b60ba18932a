// The Durable Streams reference server with its file-backed store (each append
// fdatasync'd), as a user would run it instead of this service.
//   node server.mjs PORT DATA_DIR
import { DurableStreamTestServer } from "@durable-streams/server"

const [port, dataDir] = process.argv.slice(2)
const server = new DurableStreamTestServer({
  port: Number(port),
  host: "127.0.0.1",
  dataDir,
  compression: false,
})
await server.start()
console.log("ready")
