-- wrk script: xgr_sessionAlive (positional params) on one session, keep-alive POSTs.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"jsonrpc":"2.0","id":1,"method":"xgr_sessionAlive","params":["0x00000000000000000000000000000000000000c1","1"]}'
-- count answers that are not a JSON-RPC result
local bad = 0
response = function(status, headers, body)
  if status ~= 200 or not string.find(body, '"result"', 1, true) then bad = bad + 1 end
end
done = function(summary, latency, requests)
  io.write(string.format("non-2xx or error answers: %d\n", summary.errors.status))
end
