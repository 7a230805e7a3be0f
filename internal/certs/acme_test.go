package certs

import (
	"slices"
	"strings"
	"testing"
)

// --acme-domain takes only bare DNS names a CA could validate over
// HTTP-01 or TLS-ALPN-01; anything else is refused at start with a reason
// the operator can act on. The names are only read, never looked up, and
// sit under .test, which no resolver answers for.
func TestCheckDomain(t *testing.T) {
	tests := []struct {
		name, domain string
		want         string // "" when the name is taken
	}{
		{"a good name", "api.petstore.test", ""},
		{"a good name with hyphens and digits", "api-2.eu-west.petstore.test", ""},
		{"a label of 63 characters", strings.Repeat("a", 63) + ".petstore.test", ""},
		{"empty", "", "an empty name"},
		{"a port", "api.petstore.test:443", "without a port"},
		{"a scheme", "https://api.petstore.test", "without a scheme"},
		{"a path", "api.petstore.test/v1", "without a path"},
		{"a query", "api.petstore.test?x=1", "without a path"},
		{"an IP address", "192.0.2.10", "an IP address, not a domain name"},
		{"a wildcard", "*.petstore.test", "a wildcard needs the DNS-01 challenge"},
		{"a name without a dot", "localhost", "not a fully qualified domain name"},
		{"over 253 characters", strings.Repeat(strings.Repeat("a", 60)+".", 5) + "com", "not a fully qualified domain name"},
		{"an over-long label", strings.Repeat("a", 64) + ".petstore.test", "not a valid domain name"},
		{"an empty label", "api..petstore.test", "not a valid domain name"},
		{"a label starting with a hyphen", "-api.petstore.test", "not a valid domain name"},
		{"a label ending with a hyphen", "api-.petstore.test", "not a valid domain name"},
		{"an underscore", "api_v1.petstore.test", "letters, digits, hyphens and dots"},
		{"a space", "api petstore.test", "letters, digits, hyphens and dots"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkDomain(tt.domain)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("checkDomain(%q) = %v, want it taken", tt.domain, err)
			case tt.want != "" && err == nil:
				t.Errorf("checkDomain(%q) took it, want %q", tt.domain, tt.want)
			case tt.want != "" && (!strings.HasPrefix(err.Error(), "--acme-domain \""+tt.domain+"\": ") || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("checkDomain(%q) = %q, want it to name the flag and the name and say %q", tt.domain, err, tt.want)
			}
		})
	}
}

// The list is split on commas, each name trimmed and lower-cased, and one
// bad name refuses the whole list.
func TestParseDomains(t *testing.T) {
	got, err := ParseDomains(" API.Petstore.test, www.petstore.test ")
	if want := []string{"api.petstore.test", "www.petstore.test"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	for _, list := range []string{"api.petstore.test,", "api.petstore.test,localhost", "api.petstore.test:8443,www.petstore.test"} {
		if got, err := ParseDomains(list); err == nil {
			t.Errorf("ParseDomains(%q) = %q, want it refused", list, got)
		}
	}
}
