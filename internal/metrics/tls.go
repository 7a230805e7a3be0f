package metrics

import (
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"
)

// tlsMetrics report the certificates the server serves
// (docs/observing.md): when each expires, and what came of each change.
type tlsMetrics struct {
	expiry  *prometheus.GaugeVec
	changes *prometheus.CounterVec
}

func newTLSMetrics(r *prometheus.Registry) *tlsMetrics {
	t := &tlsMetrics{
		expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "petstore_tls_certificate_expiry_timestamp_seconds",
			Help: "When the certificate served for a name expires (NotAfter, Unix seconds), by its first name.",
		}, []string{"name"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "petstore_tls_certificate_changes_total",
			Help: "Certificates taken up or not, by source (files: --tls-cert and --admin-tls-cert; acme: --acme-domain) " +
				"and outcome (files: reloaded, failed; acme: obtained, renewed, failed).",
		}, []string{"source", "outcome"}),
	}
	r.MustRegister(t.expiry, t.changes)
	return t
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
	m.tls.expiry.WithLabelValues(name).Set(float64(leaf.NotAfter.Unix()))
}

// CountCertificateChange counts a certificate taken up, or a change that failed.
func (m *Metrics) CountCertificateChange(source, outcome string) {
	if m == nil {
		return
	}
	m.tls.changes.WithLabelValues(source, outcome).Inc()
}
