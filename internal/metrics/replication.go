package metrics

import "github.com/prometheus/client_golang/prometheus"

// Replication is where the replica of the SQLite file stands, as the
// server's replicator reads it (docs/production.md, "Backup and restore").
type Replication struct {
	SinceUpload float64 // seconds since the last upload (since the start, before the first)
	Behind      float64 // seconds the replica has lacked a local transaction; 0 when it holds all
	Bytes       int64   // uploaded by this server
	Errors      int64   // failed calls to the replica's store
	Waiting     int64   // bytes waiting on this machine to be uploaded
}

// CountReplication makes the petstore_replication_* series report read's
// answer at each scrape. Litestream counts on Prometheus's global
// registry, which the server does not serve; these are the server's own.
func (m *Metrics) CountReplication(read func() Replication) {
	since := prometheus.NewDesc("petstore_replication_seconds_since_upload",
		"Seconds since the last upload to the replica (since the server started, before the first).", nil, nil)
	behind := prometheus.NewDesc("petstore_replication_behind_seconds",
		"Seconds the replica has lacked a transaction this server wrote; 0 when it holds every one.", nil, nil)
	bytes := prometheus.NewDesc("petstore_replication_uploaded_bytes_total",
		"Bytes this server uploaded to the replica.", nil, nil)
	errs := prometheus.NewDesc("petstore_replication_errors_total",
		"Calls to the replica's store that failed.", nil, nil)
	waiting := prometheus.NewDesc("petstore_replication_waiting_bytes",
		"Bytes waiting on this machine to be uploaded to the replica.", nil, nil)
	m.register(func(ch chan<- prometheus.Metric) {
		r := read()
		ch <- prometheus.MustNewConstMetric(since, prometheus.GaugeValue, r.SinceUpload)
		ch <- prometheus.MustNewConstMetric(behind, prometheus.GaugeValue, r.Behind)
		ch <- prometheus.MustNewConstMetric(bytes, prometheus.CounterValue, float64(r.Bytes))
		ch <- prometheus.MustNewConstMetric(errs, prometheus.CounterValue, float64(r.Errors))
		ch <- prometheus.MustNewConstMetric(waiting, prometheus.GaugeValue, float64(r.Waiting))
	}, since, behind, bytes, errs, waiting)
}
