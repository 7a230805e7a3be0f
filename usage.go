package main

// The usage history (docs/admin.md, "The usage history"): for each budget (the
// keys of a roll share one) and UTC day, every request that carried a valid
// key, counted once in one of five columns. A request adds one to an
// atomic counter of its key; the flush every limits.UsageFlushEvery writes the
// counts of every key, summed by budget and day, in one batch, where each
// server's counts are added to what the others wrote. Days older than
// manage.UsageHistoryDays are pruned hourly.
