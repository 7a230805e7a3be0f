package metrics

import (
	"context"
	"crypto/x509"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrapeTimeout bounds a count read from the database at a scrape.
const scrapeTimeout = 2 * time.Second

// CountPets makes petstore_pets report count's answer; ok false (the
// in-memory copy is still being made) leaves it out of a scrape.
func (m *Metrics) CountPets(count func() (n int, ok bool)) {
	desc := prometheus.NewDesc("petstore_pets", "Pets in the store.", nil, nil)
	m.register(func(ch chan<- prometheus.Metric) {
		if n, ok := count(); ok {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(n))
		}
	}, desc)
}

// CountAuditEvents makes petstore_audit_events_total report the events of
// the audit trail by action (each of actions), as count reads them from the
// database at each scrape: every server and every command writes to the
// trail, and it is append only, so the count only grows, and every server
// sharing a database reports the same. A database that does not answer
// leaves it out of that scrape.
func (m *Metrics) CountAuditEvents(actions []string, count func(context.Context) (map[string]int64, error)) {
	desc := prometheus.NewDesc("petstore_audit_events_total",
		"Events of the audit trail (key.created, key.revoked, key.rolled, key.banned, keys.copied), by action, written by any server or command; each server sharing a database reports the same.",
		[]string{"action"}, nil)
	m.register(func(ch chan<- prometheus.Metric) {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
		defer cancel()
		counts, err := count(ctx)
		if err != nil {
			return
		}
		for _, action := range actions {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(counts[action]), action)
		}
	}, desc)
}

// CountDelivery counts a webhook attempt that left its delivery in state
// (a key of Names.Deliveries).
func (m *Metrics) CountDelivery(state string) {
	if m != nil {
		m.deliveries[state].Inc()
	}
}

// CountWebhookBacklog makes petstore_webhook_events_waiting and
// petstore_webhook_oldest_waiting_seconds report the outbox as backlog
// reads it from the database at each scrape (every server sharing a
// database reports the same). A database that does not answer leaves them
// out of that scrape.
func (m *Metrics) CountWebhookBacklog(backlog func(context.Context) (int64, time.Time, error), now func() time.Time) {
	waiting := prometheus.NewDesc("petstore_webhook_events_waiting",
		"Webhook deliveries waiting to be made (pending, to enabled endpoints), in the outbox every server shares.", nil, nil)
	oldestAge := prometheus.NewDesc("petstore_webhook_oldest_waiting_seconds",
		"Age of the event of the oldest waiting webhook delivery; 0 when none waits.", nil, nil)
	m.register(func(ch chan<- prometheus.Metric) {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
		defer cancel()
		n, oldest, err := backlog(ctx)
		if err != nil {
			return
		}
		age := 0.0
		if !oldest.IsZero() {
			age = max(0, now().Sub(oldest).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(waiting, prometheus.GaugeValue, float64(n))
		ch <- prometheus.MustNewConstMetric(oldestAge, prometheus.GaugeValue, age)
	}, waiting, oldestAge)
}

// register registers a collector of the series descs describe, which
// collect makes at each scrape. A nil *Metrics registers nothing.
func (m *Metrics) register(collect func(chan<- prometheus.Metric), descs ...*prometheus.Desc) {
	if m != nil {
		m.registry.MustRegister(funcCollector{descs, collect})
	}
}

type funcCollector struct {
	descs   []*prometheus.Desc
	collect func(chan<- prometheus.Metric)
}

func (c funcCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c funcCollector) Collect(ch chan<- prometheus.Metric) { c.collect(ch) }

// CallTimer times one kind of call (a database or Redis operation) into its
// histogram. The zero CallTimer, from a nil *Metrics, does nothing.
type CallTimer struct{ obs prometheus.Observer }

// Since records a call that began at start: defer timer.Since(time.Now()).
func (t CallTimer) Since(start time.Time) {
	if t.obs != nil {
		t.obs.Observe(time.Since(start).Seconds())
	}
}

// DatabaseCall returns the timer of a database operation (a method of the
// storage, such as "CreatePets"). Resolve it once, not per call.
func (m *Metrics) DatabaseCall(operation string) CallTimer {
	if m == nil {
		return CallTimer{}
	}
	return CallTimer{m.dbCalls.WithLabelValues(operation)}
}

// RedisCall returns the timer of a Redis operation (a script, PING ...), for
// the Redis rate limiter. Resolve it once, not per call.
func (m *Metrics) RedisCall(operation string) CallTimer {
	if m == nil {
		return CallTimer{}
	}
	return CallTimer{m.redisCalls.WithLabelValues(operation)}
}

// SetRateLimitFallback sets petstore_ratelimit_fallback: on while Redis is
// unreachable and limits are kept in process.
func (m *Metrics) SetRateLimitFallback(on bool) {
	if m != nil {
		setFlag(m.fallback, on)
	}
}

// SetDatabaseDown sets petstore_database_down: on while the health probe
// finds the database unreachable.
func (m *Metrics) SetDatabaseDown(down bool) {
	if m != nil {
		setFlag(m.dbDown, down)
	}
}

// setFlag sets a gauge that is 1 while something holds, else 0.
func setFlag(g prometheus.Gauge, on bool) {
	v := 0.0
	if on {
		v = 1
	}
	g.Set(v)
}

// CertificateExpires sets the expiry gauge of leaf's first name.
func (m *Metrics) CertificateExpires(leaf *x509.Certificate) {
	if m == nil || leaf == nil {
		return
	}
	name := leaf.Subject.CommonName
	if len(leaf.DNSNames) > 0 {
		name = leaf.DNSNames[0]
	}
	m.certExpiry.WithLabelValues(name).Set(float64(leaf.NotAfter.Unix()))
}

// CountCertificateChange counts a certificate taken up, or a change that failed.
func (m *Metrics) CountCertificateChange(source, outcome string) {
	if m != nil {
		m.certChanges.WithLabelValues(source, outcome).Inc()
	}
}
