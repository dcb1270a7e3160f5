-- SPDX-License-Identifier: MIT
-- wrk_bench.lua - the one wrk script behind every HTTP measurement of
-- bench/http_bench.sh. The mode comes from the environment so that one
-- script serves every server (wrk gives scripts no portable per-run
-- argument before the first request is built):
--
--   BENCH_MODE=post   POST BENCH_PATH, body {"records":[{"value":"<256 B>"}..]}
--                     with BENCH_RECORDS records (default 1); with
--                     BENCH_PARTITIONS=P > 0 record i carries
--                     "partition": i % P
--   BENCH_MODE=get    GET BENCH_PATH as it is (webdis XADD)
--   BENCH_MODE=fetch  GET BENCH_PATH .. <random offset in [0, BENCH_OFFSETS)>
--   BENCH_MODE=range  GET BENCH_PATH with "Range: bytes=P-(P+BENCH_RANGE-1)",
--                     P random in [0, BENCH_SIZE - BENCH_RANGE]
--
-- done() prints one JSON line (prefixed by nothing else) with the raw
-- counts; the shell script turns them into rates and ratios.

local mode = os.getenv("BENCH_MODE") or "get"
local path = os.getenv("BENCH_PATH") or "/"
local nrec = tonumber(os.getenv("BENCH_RECORDS") or "1")
local offsets = tonumber(os.getenv("BENCH_OFFSETS") or "1")
local size = tonumber(os.getenv("BENCH_SIZE") or "0")
local range = tonumber(os.getenv("BENCH_RANGE") or "1048576")
local nparts = tonumber(os.getenv("BENCH_PARTITIONS") or "0")

local threads = 0
local fixed = nil

function setup(thread)
   threads = threads + 1
   thread:set("tid", threads)
end

local function body_of(n)
   local value = string.rep("abcdefghijklmnop", 16) -- 256 bytes
   local parts = {}
   for i = 1, n do
      if nparts > 0 then
         parts[i] = '{"partition":' .. ((i - 1) % nparts) .. ',"value":"' .. value .. '"}'
      else
         parts[i] = '{"value":"' .. value .. '"}'
      end
   end
   return '{"records":[' .. table.concat(parts, ",") .. ']}'
end

function init(args)
   -- Distinct streams per thread; the seed only spreads reads over the log.
   math.randomseed(os.time() * 97 + (tid or 0))
   if mode == "post" then
      fixed = wrk.format("POST", path, {["Content-Type"] = "application/json"}, body_of(nrec))
   elseif mode == "get" then
      fixed = wrk.format("GET", path)
   end
end

function request()
   if fixed ~= nil then
      return fixed
   end
   if mode == "fetch" then
      return wrk.format("GET", path .. math.random(0, offsets - 1))
   end
   -- range
   local hi = size - range
   if hi < 0 then hi = 0 end
   local p = math.random(0, hi)
   return wrk.format("GET", path, {["Range"] = "bytes=" .. p .. "-" .. (p + range - 1)})
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      '{"requests":%d,"bytes":%d,"duration_us":%d,"err_connect":%d,"err_read":%d,' ..
      '"err_write":%d,"err_status":%d,"err_timeout":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
      summary.requests, summary.bytes, summary.duration, e.connect, e.read, e.write,
      e.status, e.timeout, latency:percentile(50), latency:percentile(99), latency.max))
end
