-- limitRules (limit_model.go) in Lua: one run of one caller's limit rules,
-- atomically in Redis, so that the servers naming one Redis together grant
-- exactly what one would. Time is Redis's TIME in whole ms. The minute
-- bucket is a GCRA: t, r below are its theoretical arrival time, t ms +
-- r/pm ms, and its debt, how far that is ahead of now in 1/pm ms, 60000 a
-- token. FuzzLimitScriptAgreesWithTheModel proves the two equal. ARGV is
-- scriptArgs.encode's, the answer decodeScriptAnswer's (limit_script.go).
--
-- KEYS[1] is the caller's state, a hash: t, r; d, n the UTC day and its
-- count; wu, wc the wait's end (ms) and the requests during it; bu the ban's
-- end; lu the end of the last ban lifted (a floor no later is not raised
-- again); l:S, x:S server S's lease: its tokens, and when Redis takes them
-- as spent. It expires once every part is as good as new.
local key = KEYS[1]
local now = tonumber(ARGV[1]) -- 0: Redis TIME (only tests pass one)
if now == 0 then
	local t = redis.call('TIME')
	now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local pm, pd, cost = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local banAfter, banFor = tonumber(ARGV[5]), tonumber(ARGV[6])
local durable, seed = ARGV[7] == '1', tonumber(ARGV[8])
local floor, floorDay = tonumber(ARGV[9]), tonumber(ARGV[10])
local owner, giveBack, spentBy = ARGV[11], tonumber(ARGV[12]), tonumber(ARGV[13])
local want, keep, share = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
local banFloor, lift = tonumber(ARGV[17]), tonumber(ARGV[18]) -- 0: none

local msPerDay, token = 86400000, 60000
local today = math.floor(now / msPerDay)
local f, out, outUntil = {}, {}, {}
local s = redis.call('HGETALL', key)
for i = 1, #s, 2 do
	local name, v = s[i], tonumber(s[i + 1])
	local kind = string.sub(name, 1, 2)
	if kind == 'l:' then
		out[string.sub(name, 3)] = v
	elseif kind == 'x:' then
		outUntil[string.sub(name, 3)] = v
	else
		f[name] = v
	end
end
local t, r, n = f.t or 0, f.r or 0, f.n or 0
local wu, wc, bu, lu = f.wu or 0, f.wc or 0, f.bu or 0, f.lu or 0

-- A lift, and nothing else: the key lives as save below would have it
-- live, the bucket, the leases and the day as they were.
if lift > 0 then
	if bu <= lift then
		bu, wu, wc = 0, 0, 0
	end
	lu = math.max(lu, lift)
	redis.call('HSET', key, 'bu', bu, 'wu', wu, 'wc', wc, 'lu', lu)
	local ttl = math.max(t - now + 1, wu - now, bu - now, lu - now, 1)
	for _, u in pairs(outUntil) do
		ttl = math.max(ttl, u - now)
	end
	if durable then
		ttl = math.max(ttl, msPerDay - now % msPerDay)
	end
	redis.call('PEXPIRE', key, ttl)
	return {0, now, 0, 0, today, 0, 0}
end

local changed = false
if f.d ~= today then
	if durable then
		if seed < 0 then
			return {3, now, 0, 0, today, 0, 0}
		end
		n = seed -- set only while the count is missing: the first seed wins
	else
		n = 0
	end
	changed = true
elseif floor > n and floorDay == today then
	n = floor
	changed = true
end

-- The debt, at least the tokens leased out: the bucket does not refill
-- them while they are out. Leases that expired are held as spent now, and
-- their records go. The lease this run settles was out whole until its
-- spent tokens were spent (by spentBy), and its unspent ones until now,
-- when they go back.
local debt = 0
if t >= now then
	debt = (t - now) * pm + r
end
local leasedOut, gone = 0, {}
for who, c in pairs(out) do
	leasedOut = leasedOut + c
	if who == owner or (outUntil[who] or 0) <= now then
		gone[#gone + 1] = 'l:' .. who
		gone[#gone + 1] = 'x:' .. who
	end
end
local mine = out[owner]
if mine and (outUntil[owner] or 0) > now then
	local back = math.min(giveBack, mine)
	local others = leasedOut - mine
	debt = math.max(debt, (others + back) * token, (leasedOut * token) - math.max(0, now - spentBy) * pm)
	debt = math.max(0, debt - back * token)
	n = math.max(0, n - back)
else
	debt = math.max(debt, leasedOut * token)
end
local lease, leaseUntil = 0, math.min(now + keep, (today + 1) * msPerDay)

-- The database's ban raises one Redis lost, unless it was lifted.
local floored = banFloor > now and banFloor > bu and banFloor > lu
if floored then
	bu, wu, wc = banFloor, 0, 0
end

-- Numbers reach Redis as text of 14 significant digits: milliseconds since
-- 1970 have 13 until the year 2286.
local function save()
	t, r = now + math.floor(debt / pm), debt % pm
	local ttl = math.max(t - now + 1, wu - now, bu - now, lu - now, 1)
	for who, u in pairs(outUntil) do
		if u > now and who ~= owner then
			ttl = math.max(ttl, u - now)
		end
	end
	if durable then
		ttl = math.max(ttl, msPerDay - now % msPerDay)
	end
	redis.call('HSET', key, 't', t, 'r', r, 'd', today, 'n', n, 'wu', wu, 'wc', wc, 'bu', bu, 'lu', lu)
	if #gone > 0 then
		redis.call('HDEL', key, unpack(gone))
	end
	if lease > 0 then
		redis.call('HSET', key, 'l:' .. owner, lease, 'x:' .. owner, leaseUntil)
		ttl = math.max(ttl, leaseUntil - now)
	end
	redis.call('PEXPIRE', key, ttl)
end

if now < bu then
	if changed or #gone > 0 or floored then
		save()
	end
	return {2, now, debt, n, today, bu, 0}
end
if cost == 0 then
	if (changed and durable) or #gone > 0 then
		save()
	end
	return {0, now, debt, n, today, 0, 0}
end
if debt <= (pm - 1) * token and n < pd then
	local take = 1
	if owner ~= '' and want > 1 then
		local left = math.min(math.floor((pm * token - debt) / token), pd - n)
		take = math.max(1, math.min(want, math.floor(left / share)))
	end
	debt, n, wu, wc, lease = debt + take * token, n + take, 0, 0, take - 1
	save()
	return {0, now, debt, n, today, 0, lease}
end

-- Refused: nothing is spent. Tell the caller how long to wait, in whole
-- seconds, and ban one that keeps sending during the wait.
local wait
if n >= pd then
	wait = msPerDay - now % msPerDay
else
	wait = (debt - (pm - 1) * token) / pm
end
wait = math.max(1, math.ceil(wait / 1000))
if now < wu then
	wc = wc + 1
	if wc > banAfter then
		bu, wu, wc = now + banFor, 0, 0
		save()
		return {4, now, debt, n, today, bu, 0}
	end
else
	wu, wc = now + wait * 1000, 0
end
save()
return {1, now, debt, n, today, wait, 0}
