// The Durable Streams reference server with its file-backed store (each append
// fdatasync'd), as a user would run it instead of this service.
//   node server.mjs PORT DATA_DIR [FILE_HANDLES]
//
// One change from its defaults: the file store keeps FILE_HANDLES (default
// 10,000) segment files open instead of 100. The server offers no option for
// it, so the store is made here, as the server makes it, and handed over.
// With more than 100 streams written to, the store's pool closes the file of
// a stream between an append's write and its fdatasync; the fdatasync then
// fails with "[FileHandlePool] Cannot fsync: handle not found", which the
// server answers as 404 "Stream not found" (any error whose message says "not
// found" is one) after the bytes were written, and that stream's producer
// stalls. Every stream a benchmark writes to keeps its file open here.
import { DurableStreamTestServer, FileBackedStreamStore } from "@durable-streams/server"

const [port, dataDir, handles = "10000"] = process.argv.slice(2)
const server = new DurableStreamTestServer({
  port: Number(port),
  host: "127.0.0.1",
  compression: false,
})
server.store = new FileBackedStreamStore({ dataDir, maxFileHandles: Number(handles) })
await server.start()
console.log("ready")
