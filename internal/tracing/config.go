package tracing

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
)

// Config is what the OTEL_* variables ask for. The zero Config is tracing
// off.
type Config struct {
	// Endpoint is the URL the spans are posted to (…/v1/traces); "" is
	// tracing off.
	Endpoint string
	Headers  map[string]string
	// Resource is the service's attributes, service.name among them.
	Resource []attribute.KeyValue
	Sampler  string  // one of samplers
	Ratio    float64 // the ratio of the traceidratio samplers
	// Delay is the longest a span waits to be sent with others
	// (OTEL_BSP_SCHEDULE_DELAY, in milliseconds; default 5 s).
	Delay time.Duration
	// TrustParent honours an incoming traceparent and tracestate
	// (--trust-traceparent); otherwise each request starts a trace.
	TrustParent bool
}

// On says whether tracing is on: an endpoint is set.
func (c Config) On() bool { return c.Endpoint != "" }

// The defaults: one request in a hundred sampled, unless its caller's
// trusted traceparent says otherwise.
const (
	DefaultService = "petstore"
	DefaultSampler = "parentbased_traceidratio"
	DefaultRatio   = 0.01
)

// samplers are the values of OTEL_TRACES_SAMPLER understood, and whether
// each takes a ratio in OTEL_TRACES_SAMPLER_ARG.
var samplers = map[string]bool{
	"always_on": false, "always_off": false, "traceidratio": true,
	"parentbased_always_on": false, "parentbased_always_off": false, "parentbased_traceidratio": true,
}

// FromEnv reads the OTEL_* variables through getenv and checks each: an
// error names the variable and says what is wrong, in one line.
func FromEnv(getenv func(string) string) (Config, error) {
	var c Config
	var err error
	if c.Endpoint, err = endpoint(getenv); err != nil {
		return Config{}, err
	}
	if c.Headers, err = pairs("OTEL_EXPORTER_OTLP_HEADERS", getenv("OTEL_EXPORTER_OTLP_HEADERS")); err != nil {
		return Config{}, err
	}
	attrs, err := pairs("OTEL_RESOURCE_ATTRIBUTES", getenv("OTEL_RESOURCE_ATTRIBUTES"))
	if err != nil {
		return Config{}, err
	}
	if name := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); name != "" {
		attrs["service.name"] = name
	} else if attrs["service.name"] == "" {
		attrs["service.name"] = DefaultService
	}
	for k, v := range attrs {
		c.Resource = append(c.Resource, attribute.String(k, v))
	}
	if c.Delay, err = delay(getenv("OTEL_BSP_SCHEDULE_DELAY")); err != nil {
		return Config{}, err
	}
	c.Sampler, c.Ratio, err = sampler(getenv)
	return c, err
}

// delay is OTEL_BSP_SCHEDULE_DELAY: whole milliseconds, 5000 by default.
func delay(raw string) (time.Duration, error) {
	if raw = strings.TrimSpace(raw); raw == "" {
		return 5 * time.Second, nil
	}
	ms, err := strconv.ParseUint(raw, 10, 31)
	if err != nil || ms == 0 {
		return 0, fmt.Errorf("OTEL_BSP_SCHEDULE_DELAY must be a number of milliseconds above 0, not %q", raw)
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// endpoint is OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as it is, or
// OTEL_EXPORTER_OTLP_ENDPOINT with /v1/traces added, as the specification
// says; either must be an http or https URL with a host.
func endpoint(getenv func(string) string) (string, error) {
	name, raw := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	if raw == "" {
		name, raw = "OTEL_EXPORTER_OTLP_ENDPOINT", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%s must be an http:// or https:// URL such as http://localhost:4318, not %q", name, raw)
	}
	if name == "OTEL_EXPORTER_OTLP_ENDPOINT" {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	return u.String(), nil
}

// pairs reads a list of key=value,key=value whose values may be
// percent-encoded (OTEL_EXPORTER_OTLP_HEADERS, OTEL_RESOURCE_ATTRIBUTES).
// The error never repeats a value: a header may hold a secret.
func pairs(name, raw string) (map[string]string, error) {
	m := map[string]string{}
	if strings.TrimSpace(raw) == "" {
		return m, nil
	}
	for i, item := range strings.Split(raw, ",") {
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%s must be a list of key=value separated by commas; item %d is not", name, i+1)
		}
		value, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s: the value of %s is not percent-encoded correctly", name, k)
		}
		m[k] = value
	}
	return m, nil
}

// sampler is OTEL_TRACES_SAMPLER (default parentbased_traceidratio) and
// the ratio OTEL_TRACES_SAMPLER_ARG gives it (default 0.01).
func sampler(getenv func(string) string) (string, float64, error) {
	name := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER"))
	if name == "" {
		name = DefaultSampler
	}
	takesRatio, known := samplers[name]
	if !known {
		return "", 0, fmt.Errorf("OTEL_TRACES_SAMPLER must be always_on, always_off, traceidratio, parentbased_always_on, "+
			"parentbased_always_off or parentbased_traceidratio, not %q", name)
	}
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	if !takesRatio || arg == "" {
		return name, DefaultRatio, nil
	}
	ratio, err := strconv.ParseFloat(arg, 64)
	if err != nil || ratio < 0 || ratio > 1 {
		return "", 0, fmt.Errorf("OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, such as 0.01, not %q", arg)
	}
	return name, ratio, nil
}
