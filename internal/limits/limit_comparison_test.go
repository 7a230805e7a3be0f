package limits

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
)

// limitSeeds are the committed seed corpus of the fuzz test.
func limitSeeds(t *testing.T) [][]byte {
	t.Helper()
	dir := filepath.Join("testdata", "fuzz", "FuzzLimitScriptAgreesWithTheModel")
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("the seed corpus in %s: %v", dir, err)
	}
	var seeds [][]byte
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		_, quoted, ok := strings.Cut(strings.TrimSpace(string(b)), "\n[]byte(")
		if !ok {
			t.Fatalf("%s is not a corpus file of one []byte", e.Name())
		}
		data, err := strconv.Unquote(strings.TrimSuffix(quoted, ")"))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		seeds = append(seeds, []byte(data))
	}
	return seeds
}

// A comparison that cannot fail proves nothing: each change of one
// comparison, in the script or in the model, makes a sequence of the seed
// corpus differ. The model's changes are made through its inputs, each the
// exact equivalent of a changed comparison.
func TestLimitComparisonCatchesAChangedComparison(t *testing.T) {
	c := newLimitComparison(t)
	seeds := limitSeeds(t)
	for _, tc := range []struct {
		name     string
		from, to string // in limit.lua
		rules    func(limitState, limitFigures, limitRun) (limitState, limitAnswer)
	}{
		{name: "script: a token left is debt < (pm-1)", from: "if debt <= (pm - 1) * token and n < pd then", to: "if debt < (pm - 1) * token and n < pd then"},
		{name: "script: the day allows n <= pd", from: "if debt <= (pm - 1) * token and n < pd then", to: "if debt <= (pm - 1) * token and n <= pd then"},
		{name: "script: a ban starts at wc >= banAfter", from: "if wc > banAfter then", to: "if wc >= banAfter then"},
		{name: "script: a ban lasts through its end", from: "if now < bu then", to: "if now <= bu then"},
		{name: "script: a wait lasts through its end", from: "if now < wu then", to: "if now <= wu then"},
		{name: "script: the day's quota is over at n > pd", from: "if n >= pd then", to: "if n > pd then"},
		{name: "script: a lift leaves the ban it names", from: "if bu <= lift then", to: "if bu < lift then"},
		{name: "script: a floor at the last lift's end is raised again", from: "banFloor > now and banFloor > bu and banFloor > lu", to: "banFloor > now and banFloor > bu and banFloor >= lu"},
		{name: "script: a floor that ends now bans", from: "banFloor > now and banFloor > bu and banFloor > lu", to: "banFloor >= now and banFloor > bu and banFloor > lu"},
		{name: "script: a lift leaves the wait", from: "bu, wu, wc = 0, 0, 0", to: "bu = 0"},
		{name: "script: a lease expires after its end", from: "if who == owner or (outUntil[who] or 0) <= now then", to: "if who == owner or (outUntil[who] or 0) < now then"},
		{name: "model: a ban starts at waitCount >= banAfter", rules: func(s limitState, f limitFigures, run limitRun) (limitState, limitAnswer) {
			f.banAfter-- // waitCount+1 > banAfter-1: waitCount+1 >= banAfter
			return modelRules(s, f, run)
		}},
		{name: "model: a token left is tokens > 1", rules: func(s limitState, f limitFigures, run limitRun) (limitState, limitAnswer) {
			if run.tokens == 1 {
				run.tokens = math.Nextafter(1, 0) // tokens >= 1 at 1 refused: tokens > 1
			}
			return modelRules(s, f, run)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			script, rules := limitScriptText, modelRules
			if tc.from != "" {
				if strings.Count(script, tc.from) != 1 {
					t.Fatalf("limit.lua does not hold %q once", tc.from)
				}
				script = strings.Replace(script, tc.from, tc.to, 1)
			}
			if tc.rules != nil {
				rules = tc.rules
			}
			for _, data := range seeds {
				if err := c.run(script, rules, data); err != nil {
					t.Logf("caught: %v", err)
					return
				}
			}
			t.Errorf("no sequence of the seed corpus (%d) tells the change apart", len(seeds))
		})
	}
}

// The comparison tolerates a key gone in transit only for a key the model
// keeps at most expiryInTransit: one it keeps a millisecond longer, or one
// the script gave no time to live, is still a disagreement.
func TestLimitComparisonToleratesOnlyAnExpiryInTransit(t *testing.T) {
	c := newLimitComparison(t)
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	gone, none := scriptTTL{-2, -2}, scriptTTL{-1, -1}
	for _, tc := range []struct {
		name   string
		lives  time.Duration // the model's time to live
		ttl    scriptTTL
		wrong  bool
		forgot bool
	}{
		{name: "gone at the tolerance", lives: expiryInTransit, ttl: gone, forgot: true},
		{name: "gone at a millisecond", lives: time.Millisecond, ttl: gone, forgot: true},
		{name: "gone past the tolerance", lives: expiryInTransit + time.Millisecond, ttl: gone, wrong: true},
		{name: "no time to live", lives: time.Millisecond, ttl: none, wrong: true},
		{name: "the same time to live", lives: 3 * time.Millisecond, ttl: scriptTTL{3, 3}},
		{name: "a longer time to live", lives: 3 * time.Millisecond, ttl: scriptTTL{5, 5}, wrong: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim := domain.Limits{PerMinute: 60, PerDay: 100}
			p := &limitPair{ctx: t.Context(), client: c.client, key: "{" + c.prefix + ":transit}:limit",
				fig: limitFigures{Limits: lim}, perSecond: 1, now: now}
			p.forget()
			// A full bucket and a wait: the model keeps the state as long as the wait.
			state := limitState{waitUntil: now.Add(tc.lives)}
			err := p.keep(state, limitAnswer{now: now, tokens: 60}, tc.ttl)
			if (err != nil) != tc.wrong {
				t.Fatalf("keep: %v, want an error %v", err, tc.wrong)
			}
			if forgot := p.forgetAt.IsZero(); !tc.wrong && forgot != tc.forgot {
				t.Errorf("forgot the caller %v, want %v", forgot, tc.forgot)
			}
		})
	}
}
