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
--
-- The steps are limitRules' in limit_model.go, local functions under the
-- same names and in the same order; the script's body at the end is
-- limitRules itself, as Lua wants a function defined before it is called.
-- A step changes the state's locals below, as the Go step changes *s, and
-- stores nothing: save does, and the body a lift. Each step reads the
-- arguments only it needs, when it needs them, and is handed what the
-- body has at hand: every local a step names is made anew as an upvalue
-- in every run, and every number read is a strtod.
local key = KEYS[1]
local now = tonumber(ARGV[1]) -- 0: Redis TIME (only tests pass one)
if now == 0 then
	local t = redis.call('TIME')
	now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local pm, pd = tonumber(ARGV[2]), tonumber(ARGV[3])
local durable, owner = ARGV[7] == '1', ARGV[11]

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
-- The bucket's debt at now, what limitRun.tokens is to the Go rules.
local debt = 0
if t >= now then
	debt = (t - now) * pm + r
end

-- The statuses, as limit_model.go names them.
local allowed, limited, banned, needSeed, banStarted = 0, 1, 2, 3, 4

-- liftBan: the ban that ends at lift or sooner ends, with its wait, and
-- lift is kept as the end of the last ban lifted.
local function liftBan(lift)
	if bu <= lift then
		bu, wu, wc = 0, 0, 0
	end
	lu = math.max(lu, lift)
end

-- turnDay: a new day's count starts at 0, or for a durable caller at the
-- seed (-1: not read yet); today's is raised to a floor of today (-1:
-- none). changed: the day or its count moved; seeded false: the count is
-- missing and no seed came.
local function turnDay()
	if f.d ~= today then
		if durable then
			local seed = tonumber(ARGV[8])
			if seed < 0 then
				return false, false
			end
			n = seed -- set only while the count is missing: the first seed wins
		else
			n = 0
		end
		return true, true
	end
	local floor = tonumber(ARGV[9])
	if floor > n and tonumber(ARGV[10]) == today then
		n = floor
		return true, true
	end
	return false, true
end

-- spendable: the debt, at least the tokens leased out: the bucket does not
-- refill them while they are out. Leases that expired are held as spent
-- now, and their records go (gone). The lease this run settles was out
-- whole until its spent tokens were spent (by spentBy), and its unspent
-- ones (giveBack of them) until now, when they go back.
local function spendable(debt)
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
		local giveBack, spentBy = tonumber(ARGV[12]), tonumber(ARGV[13])
		local back = math.min(giveBack, mine)
		local others = leasedOut - mine
		debt = math.max(debt, (others + back) * token, (leasedOut * token) - math.max(0, now - spentBy) * pm)
		debt = math.max(0, debt - back * token)
		n = math.max(0, n - back)
	else
		debt = math.max(debt, leasedOut * token)
	end
	return debt, gone
end

-- floorBan: the database's ban (0: none) raises one Redis lost, unless it
-- was lifted.
local function floorBan()
	local banFloor = tonumber(ARGV[17])
	local floored = banFloor > now and banFloor > bu and banFloor > lu
	if floored then
		bu, wu, wc = banFloor, 0, 0
	end
	return floored
end

-- grant: the request's token, and for a lease (want of them, the request's
-- included) as many more as its share of what the minute and the day have
-- left; the debt after, and the tokens leased.
local function grant(debt)
	local take = 1
	if owner ~= '' then
		local want = tonumber(ARGV[14])
		if want > 1 then
			local left, share = math.min(math.floor((pm * token - debt) / token), pd - n), tonumber(ARGV[16])
			take = math.max(1, math.min(want, math.floor(left / share)))
		end
	end
	n, wu, wc = n + take, 0, 0
	return debt + take * token, take - 1
end

-- refuse: nothing is spent. Tell the caller how long to wait, in whole
-- seconds, and ban one that keeps sending during the wait (more than
-- banAfter requests: for banFor ms): the status and Retry-After, or the
-- ban's end.
local function refuse(debt)
	local wait
	if n >= pd then
		wait = msPerDay - now % msPerDay
	else
		wait = (debt - (pm - 1) * token) / pm
	end
	wait = math.max(1, math.ceil(wait / 1000))
	if now < wu then
		local banAfter, banFor = tonumber(ARGV[5]), tonumber(ARGV[6])
		wc = wc + 1
		if wc > banAfter then
			bu, wu, wc = now + banFor, 0, 0
			return banStarted, bu
		end
	else
		wu, wc = now + wait * 1000, 0
	end
	return limited, wait
end

-- save stores the state with the bucket's debt, without the leases gone,
-- with owner's new lease of tokens (none when 0), kept for keep ms or to
-- the day's end. Numbers reach Redis as text of 14 significant digits:
-- milliseconds since 1970 have 13 until the year 2286.
local function save(debt, gone, lease)
	local t, r = now + math.floor(debt / pm), debt % pm
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
		local keep = tonumber(ARGV[15])
		local leaseUntil = math.min(now + keep, (today + 1) * msPerDay)
		redis.call('HSET', key, 'l:' .. owner, lease, 'x:' .. owner, leaseUntil)
		ttl = math.max(ttl, leaseUntil - now)
	end
	redis.call('PEXPIRE', key, ttl)
end

-- limitRules: a lift alone (above 0), else the day's count, the tokens the
-- leases leave, the database's ban, and the decision for the run's cost (1
-- a request, 0 a look): banned, a look, a grant or a refusal.
local lift, cost = tonumber(ARGV[18]), tonumber(ARGV[4])
if lift > 0 then
	-- The key lives as save would have it live, the bucket, the leases
	-- and the day as they were.
	liftBan(lift)
	redis.call('HSET', key, 'bu', bu, 'wu', wu, 'wc', wc, 'lu', lu)
	local ttl = math.max(t - now + 1, wu - now, bu - now, lu - now, 1)
	for _, u in pairs(outUntil) do
		ttl = math.max(ttl, u - now)
	end
	if durable then
		ttl = math.max(ttl, msPerDay - now % msPerDay)
	end
	redis.call('PEXPIRE', key, ttl)
	return {allowed, now, 0, 0, today, 0, 0}
end
local changed, seeded = turnDay()
if not seeded then
	return {needSeed, now, 0, 0, today, 0, 0}
end
local gone
debt, gone = spendable(debt)
local floored = floorBan()
if now < bu then
	if changed or #gone > 0 or floored then
		save(debt, gone, 0)
	end
	return {banned, now, debt, n, today, bu, 0}
end
if cost == 0 then
	if (changed and durable) or #gone > 0 then
		save(debt, gone, 0)
	end
	return {allowed, now, debt, n, today, 0, 0}
end
if debt <= (pm - 1) * token and n < pd then
	local lease
	debt, lease = grant(debt)
	save(debt, gone, lease)
	return {allowed, now, debt, n, today, 0, lease}
end
local status, extra = refuse(debt)
save(debt, gone, 0)
return {status, now, debt, n, today, extra, 0}
