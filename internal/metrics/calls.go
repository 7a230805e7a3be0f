package metrics

import (
	"crypto/x509"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

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
	if m == nil {
		return
	}
	m.certChanges.WithLabelValues(source, outcome).Inc()
}
