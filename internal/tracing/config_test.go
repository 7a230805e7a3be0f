package tracing

import (
	"strings"
	"testing"
	"time"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// What the variables turn into: off without an endpoint; the traces
// endpoint as it is, the general one with /v1/traces added; 1% by default.
func TestFromEnvReadsTheStandardVariables(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		endpoint string
		sampler  string
		ratio    float64
	}{
		{"nothing set: off", nil, "", DefaultSampler, DefaultRatio},
		{"the general endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "http://collector:4318/v1/traces", DefaultSampler, 0.01},
		{"its path kept", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector/otlp/"}, "https://collector/otlp/v1/traces", DefaultSampler, 0.01},
		{"the traces endpoint wins, as it is", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/traces"}, "http://b:4318/traces", DefaultSampler, 0.01},
		{"a sampler and its ratio", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.5"}, "http://a:4318/v1/traces", "traceidratio", 0.5},
		{"always_on ignores the ratio", map[string]string{"OTEL_TRACES_SAMPLER": "always_on", "OTEL_TRACES_SAMPLER_ARG": "0.5"}, "", "always_on", 0.01},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := FromEnv(envOf(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if c.Endpoint != tt.endpoint || c.Sampler != tt.sampler || c.Ratio != tt.ratio || c.On() != (tt.endpoint != "") {
				t.Errorf("got endpoint %q sampler %s ratio %v", c.Endpoint, c.Sampler, c.Ratio)
			}
			if c.Delay != 5*time.Second {
				t.Errorf("default delay %v", c.Delay)
			}
		})
	}
}

func TestFromEnvReadsHeadersAndTheResource(t *testing.T) {
	c, err := FromEnv(envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20abc, x-team = pets",
		"OTEL_RESOURCE_ATTRIBUTES":   "deployment.environment=staging,service.name=ignored",
		"OTEL_SERVICE_NAME":          "petstore-eu",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Headers["authorization"] != "Bearer abc" || c.Headers["x-team"] != "pets" {
		t.Errorf("headers %v", c.Headers)
	}
	got := map[string]string{}
	for _, kv := range c.Resource {
		got[string(kv.Key)] = kv.Value.AsString()
	}
	if got["service.name"] != "petstore-eu" || got["deployment.environment"] != "staging" {
		t.Errorf("resource %v", got)
	}
	if c, _ := FromEnv(envOf(nil)); len(c.Resource) != 1 || c.Resource[0].Value.AsString() != DefaultService {
		t.Errorf("default resource %v", c.Resource)
	}
}

// A bad value names its variable, and never repeats a header's value,
// which may be a secret.
func TestFromEnvRefusesABadValueNamingTheVariable(t *testing.T) {
	tests := []struct{ variable, value string }{
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://"},
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "grpc://collector:4317"},
		{"OTEL_TRACES_SAMPLER", "jaeger_remote"},
		{"OTEL_TRACES_SAMPLER_ARG", "2"},
		{"OTEL_TRACES_SAMPLER_ARG", "-0.1"},
		{"OTEL_TRACES_SAMPLER_ARG", "one"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "=secret-token"},
		{"OTEL_EXPORTER_OTLP_HEADERS", "authorization=%zzsecret-token"},
		{"OTEL_RESOURCE_ATTRIBUTES", "region"},
		{"OTEL_BSP_SCHEDULE_DELAY", "0"},
	}
	for _, tt := range tests {
		t.Run(tt.variable+"="+tt.value, func(t *testing.T) {
			_, err := FromEnv(envOf(map[string]string{tt.variable: tt.value}))
			if err == nil || !strings.Contains(err.Error(), tt.variable) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line naming %s", err, tt.variable)
			}
			if strings.Contains(err.Error(), "secret-token") {
				t.Errorf("the error repeats a header's value: %v", err)
			}
		})
	}
}

// Without an endpoint nothing starts: a nil Tracer, whose Shutdown is
// nothing either.
func TestStartWithoutAnEndpointStartsNothing(t *testing.T) {
	tr, err := Start(Config{}, Hooks{})
	if tr != nil || err != nil {
		t.Fatalf("Start(off) = %v, %v", tr, err)
	}
	if err := tr.Shutdown(); err != nil {
		t.Fatal(err)
	}
}
