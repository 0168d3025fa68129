// A bridge from Python (the benchmark, the tests) to the TypeScript MCP SDK's client.
//
// Started as `node ts_client.mjs '<json>'` from a directory whose node_modules
// holds @modelcontextprotocol/sdk (bench/ts_host.py installs it there, never in
// the project). The JSON names the server to start: {command, args, env, cwd}.
// The bridge starts it over stdio, initializes and lists the tools (which is
// when the SDK compiles each output schema), prints {"ready": true, "tools":
// [names], "server": {name, version}, "protocol": the version negotiated}, then
// answers one line per request read from stdin:
//   in:  {"tool": "check_inbox", "args": {...}}
//   out: {"ms": 1.23, "is_error": false, "structured": {...}, "text": "..."}
//        plus "client_error": true when the client itself failed
// "ms" is the time of client.callTool alone, measured here: the request, the
// server's answer, the SDK's parsing of it and its validation of the
// structured content against the tool's output schema. End of input closes
// the client, which stops the server.
import { createInterface } from "node:readline";
import { performance } from "node:perf_hooks";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const spec = JSON.parse(process.argv[2]);
const transport = new StdioClientTransport({
  command: spec.command,
  args: spec.args,
  env: spec.env,
  cwd: spec.cwd,
  stderr: "inherit",
});
const client = new Client({ name: "gitrelay-bench", version: "1" });
// The client hands the negotiated version to a transport that wants it (HTTP's headers).
let negotiated = null;
transport.setProtocolVersion = (version) => { negotiated = version; };

function answer(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  answer({ ready: true, tools: tools.map((t) => t.name), server: client.getServerVersion() ?? null,
           protocol: negotiated });
} catch (err) {
  answer({ ready: false, error: String(err && err.stack ? err.stack : err) });
  process.exit(1);
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  const req = JSON.parse(line);
  try {
    const start = performance.now();
    const result = await client.callTool({ name: req.tool, arguments: req.args ?? {} });
    const ms = performance.now() - start;
    const text = (result.content ?? []).map((c) => c.text ?? "").join("");
    answer({ ms, is_error: Boolean(result.isError), structured: result.structuredContent ?? null,
             text });
  } catch (err) {
    // A failure of the client itself (a result that fails its output-schema check, a
    // broken pipe), as opposed to a tool error, which is a result with isError.
    answer({ ms: null, is_error: true, structured: null, text: String(err), client_error: true });
  }
}
await client.close();
