-- rate_acquire: one call's grants in turn, at one instant; each takes one permit of every GCRA
-- bucket it names, or none. A bucket's HASH holds `t`, its theoretical arrival time (TAT, epoch
-- ms), and `l`, its deferral line. A permit is free at now when TAT - now is at most
-- (burst - 1) * interval, and taking it moves the TAT to max(TAT, now) + interval; an absent or
-- past TAT is an idle, full bucket. Refused, the grant is due at the latest, over its full
-- buckets, of the next free permit and the line, and each full bucket's line moves one interval
-- past it. A grant sees what the grants before it took and moved. On the server's clock a key
-- expires with its state.
-- KEYS[i]      bucket i's HASH (every rate key shares one hash tag: one slot)
-- ARGV[1]      now in epoch ms, or '' for the server's clock
-- ARGV[1 + g]  grant g as JSON [[i, interval, burst], ...]: per bucket of the grant its index in
--              KEYS, its emission interval in ms (period / limit) and its burst
-- reply: per grant, 0 when every permit was taken, else the ms (at least 1) until it is due

local now, server_time = clock_ms(ARGV[1])

local tats, lines, moved = {}, {}, {}
for i, key in ipairs(KEYS) do
  local held = redis.call('HMGET', key, 't', 'l')
  tats[i], lines[i] = tonumber(held[1] or ''), tonumber(held[2] or '') or 0
end

local function tat_of(i)
  return math.max(tats[i] or now, now)
end

local function grant(buckets)
  local frees, due = {}, nil
  for n, b in ipairs(buckets) do
    frees[n] = tat_of(b[1]) - (b[3] - 1) * b[2]
    if frees[n] > now then
      due = math.max(due or 0, frees[n], lines[b[1]])
    end
  end
  if due == nil then
    for _, b in ipairs(buckets) do
      tats[b[1]] = tat_of(b[1]) + b[2]
      moved[b[1]] = true
    end
    return 0
  end
  for n, b in ipairs(buckets) do
    if frees[n] > now then
      lines[b[1]] = math.max(lines[b[1]], due + b[2])
      moved[b[1]] = true
    end
  end
  return math.max(math.ceil(due - now), 1)
end

local out = {}
for g = 2, #ARGV do
  out[#out + 1] = grant(cjson.decode(ARGV[g]))
end
for i, key in ipairs(KEYS) do
  if moved[i] then
    local tat = tat_of(i)
    redis.call('HSET', key, 't', string.format('%.17g', tat), 'l', string.format('%.17g', lines[i]))
    if server_time then
      redis.call('PEXPIRE', key, math.ceil(math.max(tat, lines[i]) - now) + 1)
    end
  end
end
return out
