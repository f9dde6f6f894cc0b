-- wrk script: xgr.enqueue of a one-step session, a fresh rootPid per request (thread id * 1e9 + n),
-- so every request creates and durably stores a session.
local counter = 0
local threads = {}
setup = function(thread)
  thread:set("tid", #threads + 1)
  table.insert(threads, thread)
end
init = function(args)
  counter = 0
end
request = function()
  counter = counter + 1
  local root = tid * 1000000000 + counter
  local body = string.format('{"jsonrpc":"2.0","id":%d,"method":"xgr.enqueue","params":{"owner":"0x00000000000000000000000000000000000000c1","rootPid":%d,"xrc729":"bench","init":{"stepId":"S","payload":{"x":%d}}}}', counter, root, counter)
  return wrk.format("POST", "/", {["Content-Type"] = "application/json"}, body)
end
errors = 0
response = function(status, headers, body)
  if status ~= 200 or not string.find(body, '"queued"', 1, true) then errors = errors + 1 end
end
done = function(summary, latency, requests)
  local e = 0
  for _, t in ipairs(threads) do e = e + t:get("errors") end
  io.write(string.format("answers other than queued: %d\n", e))
end
