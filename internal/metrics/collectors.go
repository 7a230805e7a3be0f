package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrapeTimeout bounds a count read from the database at a scrape.
const scrapeTimeout = 2 * time.Second

// CountPets makes petstore_pets report count's answer; ok false (the
// in-memory copy is still being made) leaves it out of a scrape.
func (m *Metrics) CountPets(count func() (n int, ok bool)) {
	if m == nil {
		return
	}
	m.registry.MustRegister(petsCollector{
		desc:  prometheus.NewDesc("petstore_pets", "Pets in the store.", nil, nil),
		count: count,
	})
}

// CountAuditEvents makes petstore_audit_events_total report the events of
// the audit trail by action (each of actions), as count reads them from the
// database at each scrape: every server and every command writes to the
// trail, and it is append only, so the count only grows, and every server
// sharing a database reports the same. A database that does not answer
// leaves it out of that scrape.
func (m *Metrics) CountAuditEvents(actions []string, count func(context.Context) (map[string]int64, error)) {
	if m == nil {
		return
	}
	m.registry.MustRegister(auditCollector{
		desc: prometheus.NewDesc("petstore_audit_events_total",
			"Events of the audit trail (key.created, key.revoked, key.rolled, key.banned, keys.copied), by action, written by any server or command; each server sharing a database reports the same.",
			[]string{"action"}, nil),
		actions: actions,
		count:   count,
	})
}

type auditCollector struct {
	desc    *prometheus.Desc
	actions []string
	count   func(context.Context) (map[string]int64, error)
}

func (c auditCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c auditCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	counts, err := c.count(ctx)
	if err != nil {
		return
	}
	for _, action := range c.actions {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(counts[action]), action)
	}
}

type petsCollector struct {
	desc  *prometheus.Desc
	count func() (int, bool)
}

func (c petsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c petsCollector) Collect(ch chan<- prometheus.Metric) {
	if n, ok := c.count(); ok {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n))
	}
}

// CountDelivery counts a webhook attempt that left its delivery in state
// (a key of Names.Deliveries).
func (m *Metrics) CountDelivery(state string) {
	if m == nil {
		return
	}
	m.deliveries[state].Inc()
}

// CountWebhookBacklog makes petstore_webhook_events_waiting and
// petstore_webhook_oldest_waiting_seconds report the outbox as backlog
// reads it from the database at each scrape (every server sharing a
// database reports the same). A database that does not answer leaves them
// out of that scrape.
func (m *Metrics) CountWebhookBacklog(backlog func(context.Context) (int64, time.Time, error), now func() time.Time) {
	if m == nil {
		return
	}
	m.registry.MustRegister(backlogCollector{
		waiting: prometheus.NewDesc("petstore_webhook_events_waiting",
			"Webhook deliveries waiting to be made (pending, to enabled endpoints), in the outbox every server shares.", nil, nil),
		oldest: prometheus.NewDesc("petstore_webhook_oldest_waiting_seconds",
			"Age of the event of the oldest waiting webhook delivery; 0 when none waits.", nil, nil),
		backlog: backlog, now: now,
	})
}

type backlogCollector struct {
	waiting, oldest *prometheus.Desc
	backlog         func(context.Context) (int64, time.Time, error)
	now             func() time.Time
}

func (c backlogCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.waiting; ch <- c.oldest }

func (c backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	n, oldest, err := c.backlog(ctx)
	if err != nil {
		return
	}
	age := 0.0
	if !oldest.IsZero() {
		age = max(0, c.now().Sub(oldest).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(n))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}
