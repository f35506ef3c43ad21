-- wrk script for bench/run.sh. BENCH_WORKLOAD picks the request:
--   get     MCP tools/call loom_memory_get on a random key
--   set     MCP tools/call loom_memory_set: a new version of a random key
--   create  MCP tools/call loom_memory_set of a key not written before
--   search  MCP tools/call loom_search with a 2-3 word query
--   http    POST /v1/memory.get on a random key
--   ceiling MCP tools/call loom_memory_get against loom-ceiling
-- BENCH_TOKEN is the bearer, BENCH_KEYS the number of pre-filled keys.
-- An error is a non-200 answer, a JSON-RPC error or an isError result.
-- done() prints one line: rps p50_ms p99_ms max_ms errors requests.

local workload = os.getenv("BENCH_WORKLOAD") or "get"
local token = os.getenv("BENCH_TOKEN") or ""
local keys = tonumber(os.getenv("BENCH_KEYS") or "100000")
local words = {}
local threads = {}
local counter = 0

local function load_words()
  local path = os.getenv("BENCH_WORDS") or "bench/words.txt"
  for w in io.open(path):read("*a"):gmatch("%S+") do
    words[#words + 1] = w
  end
end

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  threads[#threads + 1] = thread
end

local headers = {
  ["Content-Type"] = "application/json",
  ["Accept"] = "application/json, text/event-stream",
  ["Authorization"] = "Bearer " .. token,
}

function init(args)
  math.randomseed(os.time() * 100 + (id or 0))
  load_words()
  errors = 0
  created = 0
end

local function phrase(n)
  local out = {}
  for i = 1, n do
    out[i] = words[math.random(#words)]
  end
  return table.concat(out, " ")
end

local function tool(name, arguments)
  return wrk.format("POST", "/mcp", headers,
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"' .. name ..
    '","arguments":' .. arguments .. '}}')
end

function request()
  local key = "bench-" .. math.random(0, keys - 1)
  if workload == "get" or workload == "ceiling" then
    return tool("loom_memory_get", '{"memory_key":"' .. key .. '","agent":"bench"}')
  elseif workload == "set" then
    return tool("loom_memory_set", '{"memory_key":"' .. key .. '","agent":"bench","content":"' ..
      phrase(16) .. " " .. math.random(1000000000) .. '"}')
  elseif workload == "create" then
    created = created + 1
    return tool("loom_memory_set", '{"memory_key":"new-' .. id .. '-' .. created ..
      '","agent":"bench","content":"' .. phrase(16) .. " " .. math.random(1000000000) .. '"}')
  elseif workload == "search" then
    return tool("loom_search", '{"query":"' .. phrase(math.random(2, 3)) .. '"}')
  else
    return wrk.format("POST", "/v1/memory.get", headers,
      '{"memory_key":"' .. key .. '","agent":"bench"}')
  end
end

function response(status, hdrs, body)
  -- Non-200 answers are counted by wrk itself (summary.errors.status).
  if status == 200 and (body:find('"isError":true', 1, true) or body:find('"error":{"code"', 1, true)) then
    errors = errors + 1
  end
  if status ~= 200 or errors == 1 then
    if not reported then
      reported = true
      io.stderr:write("first error (" .. status .. "): " .. body:sub(1, 300):gsub("%s+", " ") .. "\n")
    end
  end
end

function done(summary, latency, requests)
  local errs = summary.errors.connect + summary.errors.read + summary.errors.write +
    summary.errors.timeout + summary.errors.status
  for _, t in ipairs(threads) do
    errs = errs + (t:get("errors") or 0)
  end
  io.write(string.format("RESULT %.1f %.2f %.2f %.2f %d %d\n",
    summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000,
    errs, summary.requests))
end
