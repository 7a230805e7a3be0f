package testkit

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func LabelsOf(m *dto.Metric) map[string]string {
	labels := map[string]string{}
	for _, l := range m.GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	return labels
}

// RequestCounts are petstore_http_request_duration_seconds' sample counts
// by "METHOD route code".
func RequestCounts(t testing.TB, families map[string]*dto.MetricFamily) map[string]uint64 {
	t.Helper()
	counts := map[string]uint64{}
	f := families["petstore_http_request_duration_seconds"]
	if f == nil {
		return counts
	}
	if f.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("petstore_http_request_duration_seconds is a %v, want a histogram", f.GetType())
	}
	for _, m := range f.GetMetric() {
		l := LabelsOf(m)
		counts[l["method"]+" "+l["route"]+" "+l["code"]] += m.GetHistogram().GetSampleCount()
	}
	return counts
}

// CounterValues are the values of a counter family by its one label.
func CounterValues(t testing.TB, families map[string]*dto.MetricFamily, name, label string) map[string]float64 {
	t.Helper()
	f := families[name]
	if f == nil {
		t.Fatalf("no %s in /metrics", name)
	}
	values := map[string]float64{}
	for _, m := range f.GetMetric() {
		values[LabelsOf(m)[label]] = m.GetCounter().GetValue()
	}
	return values
}

// Scrape reads GET /metrics of h, a server's metrics handler, with Prometheus's own
// text-format parser.
func Scrape(t testing.TB, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", w.Code, w.Body)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("GET /metrics Content-Type %q, want the Prometheus text format", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(w.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return families
}

// ScrapeAdmin reads GET /metrics of a running server's admin listener
// (admin is its http://HOST:PORT) as Prometheus would.
func ScrapeAdmin(t testing.TB, admin string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}
