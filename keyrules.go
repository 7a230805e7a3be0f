// The rules of a key's life that hold whoever changes it (the CLI, the
// admin API) and whichever engine stores it.

package main

import "time"

// rollable refuses to roll a key that no longer works, or that was rolled
// already (its successor is the one to roll).
func rollable(k apiKey, now time.Time) error {
	switch {
	case !k.RevokedAt.IsZero():
		return errorf(codeInvalidRequest, "key %d was revoked at %s: a revoked key cannot be rolled; create a new one",
			k.ID, k.RevokedAt.Format(time.RFC3339))
	case k.expiredAt(now):
		return errorf(codeInvalidRequest, "key %d expired at %s: an expired key cannot be rolled; create a new one",
			k.ID, k.ExpiresAt.Format(time.RFC3339))
	case k.RolledTo != 0:
		return errorf(codeInvalidRequest, "key %d was rolled to key %d already: roll key %d instead", k.ID, k.RolledTo, k.RolledTo)
	}
	return nil
}

// successor is the key that replaces old in a roll: the same name, plan,
// figures, environment, scopes and expiry (a roll changes the secret, not
// the terms), spending old's rate-limit budget.
func successor(old apiKey, hash []byte) apiKey {
	return apiKey{
		Hash: hash, Name: old.Name, Plan: old.Plan, PerMinute: old.PerMinute, PerDay: old.PerDay, Env: old.Env,
		Scopes: old.Scopes, ExpiresAt: old.ExpiresAt, BudgetID: old.BudgetID,
	}
}

// rollEnd is when the old key of a roll stops: overlap from now, rounded up
// to a second, or at once for no overlap; its own expiry when that is sooner.
func rollEnd(old apiKey, now time.Time, overlap time.Duration) time.Time {
	end := now.UTC().Truncate(time.Second)
	if overlap > 0 {
		end = ceilSecond(now.Add(overlap)).UTC()
	}
	if !old.ExpiresAt.IsZero() && old.ExpiresAt.Before(end) {
		return old.ExpiresAt
	}
	return end
}
