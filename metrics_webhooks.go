package main

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// countDelivery counts an attempt that left its delivery in state.
func (m *metrics) countDelivery(state string) {
	if m == nil {
		return
	}
	m.deliveries[state].Inc()
}

// countWebhookBacklog makes petstore_webhook_events_waiting and
// petstore_webhook_oldest_waiting_seconds report the outbox as backlog
// reads it from the database at each scrape (every server sharing a
// database reports the same). A database that does not answer leaves them
// out of that scrape.
func (m *metrics) countWebhookBacklog(backlog func(context.Context) (int64, time.Time, error), now func() time.Time) {
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
	ctx, cancel := context.WithTimeout(context.Background(), auditScrapeTimeout)
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
