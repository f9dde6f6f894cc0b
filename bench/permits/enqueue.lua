-- wrk script: xgr.enqueue with a pre-signed SessionPermit per request (bench/permits/run.sh).
-- args: BODIES_FILE N. Thread t of T sends lines t, t+T, t+2T, ... once each (a permit's rootPid is
-- used once); a thread that runs out of bodies sends a public xgr_sessionAlive instead and counts it.
local threads = {}
setup = function(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
local bodies = {}
local nthreads = 2
init = function(args)
  local i = 0
  for line in io.lines(args[1]) do
    if i % nthreads == tid then
      bodies[#bodies + 1] = line
    end
    i = i + 1
  end
  next_body = 1
  errors = 0
  ran_out = 0
end
request = function()
  local b = bodies[next_body]
  next_body = next_body + 1
  if not b then
    ran_out = ran_out + 1
    b = '{"jsonrpc":"2.0","id":0,"method":"xgr_getCoreAddrs"}'
  end
  return wrk.format("POST", "/", {["Content-Type"] = "application/json"}, b)
end
response = function(status, headers, body)
  if status ~= 200 or not (string.find(body, '"queued"', 1, true) or string.find(body, '"chainId"', 1, true)) then
    errors = errors + 1
  end
end
done = function(summary, latency, requests)
  local e, r = 0, 0
  for _, t in ipairs(threads) do
    e = e + t:get("errors")
    r = r + t:get("ran_out")
  end
  io.write(string.format("answers other than queued: %d; requests after the signed bodies ran out: %d\n", e, r))
end
