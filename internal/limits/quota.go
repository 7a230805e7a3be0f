package limits

import (
	"context"
	"fmt"
	"sync"
	"time"

	"petstore/internal/domain"
)

// quotaThresholds are the shares of a day quota, in percent, whose crossing
// webhooks send (docs/webhooks.md, "What is sent").
var quotaThresholds = []int{80, 100}

// QuotaNotice is a budget's day count reaching a threshold of its quota.
// The store keeps one per budget, day and threshold: the first server to
// store it sends it, every other finds it there.
type QuotaNotice struct {
	BudgetID  int64
	KeyID     int64 // the key whose request reached it
	KeyName   string
	Plan      string
	Threshold int
	Used      int64
	Limit     int64
	Day       string // YYYY-MM-DD, UTC
	At        time.Time
}

// Notice is n as the store keeps it, with the mark that makes it once: its
// budget, day and threshold.
func (n QuotaNotice) Notice() (domain.WebhookNotice, error) {
	ev, err := domain.NewWebhookEvent(domain.WebhookQuotaThreshold, n.At, map[string]any{
		"keyId": n.KeyID, "keyName": n.KeyName, "plan": n.Plan, "threshold": n.Threshold,
		"used": n.Used, "limit": n.Limit, "day": n.Day,
	})
	mark := fmt.Sprintf("quota:%d:%s:%d", n.BudgetID, n.Day, n.Threshold)
	return domain.WebhookNotice{Mark: mark, Event: ev, ForgetAt: n.At.Add(domain.KeepQuotaMarks)}, err
}

// QuotaWatch sees each request's day count as the limiter decided it and
// keeps the thresholds reached, until the usage flush stores them. A budget
// under 80% costs a request one comparison. A nil *QuotaWatch sees nothing.
type QuotaWatch struct {
	now func() time.Time

	mu      sync.Mutex
	day     int64
	seen    map[quotaSeen]bool // what this server has noticed today
	Pending []QuotaNotice
}

// quotaSeen is a threshold of a budget's quota, noticed today.
type quotaSeen struct {
	budget    int64
	threshold int
}

func NewQuotaWatch(now func() time.Time) *QuotaWatch {
	return &QuotaWatch{now: now, seen: make(map[quotaSeen]bool)}
}

// Observe looks at the day count d reports for key, whose budget has
// limit lim.
func (q *QuotaWatch) Observe(key *domain.Key, lim domain.Limits, d Decision) {
	if q == nil || key == nil || d.DayCount*100 < lim.PerDay*int64(quotaThresholds[0]) {
		return
	}
	now := q.now()
	today := UnixDay(now)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.day != today {
		q.day, q.seen = today, make(map[quotaSeen]bool)
	}
	for _, t := range quotaThresholds {
		if d.DayCount*100 < lim.PerDay*int64(t) {
			break
		}
		seen := quotaSeen{key.BudgetID, t}
		if q.seen[seen] || len(q.Pending) >= domain.MaxPendingAuditEvents {
			continue
		}
		q.seen[seen] = true
		q.Pending = append(q.Pending, QuotaNotice{
			BudgetID: key.BudgetID, KeyID: key.ID, KeyName: key.Name, Plan: key.Plan, Threshold: t,
			Used: d.DayCount, Limit: lim.PerDay, Day: DayString(today), At: now,
		})
	}
}

// Flush stores the notices seen since the last flush through add; what
// fails stays for the next.
func (q *QuotaWatch) Flush(ctx context.Context, add func(context.Context, []domain.WebhookNotice) error) error {
	if q == nil {
		return nil
	}
	q.mu.Lock()
	taken := q.Pending
	q.Pending = nil
	q.mu.Unlock()
	if len(taken) == 0 {
		return nil
	}
	notices := make([]domain.WebhookNotice, len(taken))
	var err error
	for i, n := range taken {
		if notices[i], err = n.Notice(); err != nil {
			break
		}
	}
	if err == nil {
		err = add(ctx, notices)
	}
	if err != nil {
		q.mu.Lock()
		q.Pending = append(taken, q.Pending...)
		q.mu.Unlock()
	}
	return err
}
