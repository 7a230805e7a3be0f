package webhook

import (
	"context"
	"net/netip"
	"strings"
	"testing"
)

// TestWebhookURLHostsAreReadAsTheAddressesTheyMean: at registration, an
// endpoint's host is read as browsers, curl and inet_aton read it, and
// every form of a refused address is refused as that address, without
// DNS; so are localhost's names. A name is looked up; a public address in
// another form is refused, since the server would look it up as a name;
// a name that merely looks numeric is a name.
func TestWebhookURLHostsAreReadAsTheAddressesTheyMean(t *testing.T) {
	t.Parallel()
	const local, otherForm, broken = "--webhook-allow-private", "in another form", "ends in a number"
	for _, tt := range []struct {
		host     string
		resolves []string // what DNS answers; nil: the name must not be looked up
		says     string   // "": taken
	}{
		{"127.1", nil, local + "|(127.0.0.1)"},
		{"2130706433", nil, local + "|(127.0.0.1)"},
		{"0x7f000001", nil, local + "|(127.0.0.1)"},
		{"0X7F000001", nil, local + "|(127.0.0.1)"},
		{"0177.0.0.1", nil, local + "|(127.0.0.1)"},
		{"0x7f.1", nil, local + "|(127.0.0.1)"},
		{"127.0.0.1.", nil, local + "|(127.0.0.1)"},
		{"127.0.0.1", nil, local},
		{"１２７.０.０.１", nil, local + "|(127.0.0.1)"},
		{"127。0。0。1", nil, local + "|(127.0.0.1)"},
		{"0", nil, local + "|(0.0.0.0)"},
		{"0x", nil, local + "|(0.0.0.0)"},
		{"10.1", nil, local + "|(10.0.0.1)"},
		{"012.0.0.1", nil, local + "|(10.0.0.1)"},
		{"169.254.43518", nil, local + "|(169.254.169.254)"},
		{"[::127.0.0.1]", nil, local + "|(127.0.0.1)"},
		{"[2002:7f00:1::]", nil, local + "|(127.0.0.1)"},
		{"[::ffff:127.0.0.1]", nil, local + "|(127.0.0.1)"},
		{"[::ffff:7f00:1]", nil, local + "|(127.0.0.1)"},
		{"[64:ff9b::127.0.0.1]", nil, local + "|(127.0.0.1)"},
		{"[64:ff9b::a9fe:a9fe]", nil, local + "|(169.254.169.254)"},
		{"[::1]", nil, local},
		{"localhost", nil, local},
		{"LocalHost.", nil, local},
		{"api.localhost", nil, local},
		{"0x08080808", nil, otherForm + "|write 8.8.8.8"},
		{"134744072", nil, otherForm + "|write 8.8.8.8"},
		{"8.8.2056", nil, otherForm + "|write 8.8.8.8"},
		{"1.2.3.256", nil, broken},
		{"1.2.3.09", nil, broken},
		{"1.2.3.4.5", nil, broken},
		{"4294967296", nil, broken},
		{"hooks.0x", nil, broken},
		{"8.8.8.8", nil, ""},
		{"[2001:db8::1]", nil, ""},
		{"hooks.example.com", []string{"203.0.113.9"}, ""},
		{"rebind.example", []string{"203.0.113.9", "127.0.0.1"}, local},
		{"mapped.example", []string{"::ffff:10.0.0.1"}, local},
		{"123.example", []string{"203.0.113.9"}, ""},
		{"0x7f000001.example", []string{"203.0.113.9"}, ""},
		{"127.0.0.1.nip.example", []string{"127.0.0.1"}, local},
		{"example.0a", []string{"203.0.113.9"}, ""},
	} {
		t.Run(tt.host, func(t *testing.T) {
			looked := false
			guard := &AddressGuard{own: func() []netip.Addr { return nil }, lookup: func(_ context.Context, _, host string) ([]netip.Addr, error) {
				looked = true
				var addrs []netip.Addr
				for _, a := range tt.resolves {
					addrs = append(addrs, netip.MustParseAddr(a))
				}
				return addrs, nil
			}}
			raw := "https://" + tt.host + ":8443/hooks"
			if p := URLProblem(raw); p != "" {
				t.Fatalf("URLProblem(%q) = %q: the URL itself is refused", raw, p)
			}
			got := guard.URLProblem(context.Background(), raw)
			if looked != (tt.resolves != nil) {
				t.Errorf("looked up: %v, want %v", looked, tt.resolves != nil)
			}
			if tt.says == "" {
				if got != "" {
					t.Fatalf("URLProblem = %q, want taken", got)
				}
				return
			}
			if !strings.HasPrefix(got, "url's host ") {
				t.Fatalf("URLProblem = %q, want a refusal naming url", got)
			}
			for _, part := range strings.Split(tt.says, "|") {
				if !strings.Contains(got, part) {
					t.Fatalf("URLProblem = %q, want it to say %q", got, part)
				}
			}
		})
	}
}

// TestWebhookURLHostsWithTheFlag: a server started with
// --webhook-allow-private takes every address, but not an IPv4 address
// in a form it would look up as a name.
func TestWebhookURLHostsWithTheFlag(t *testing.T) {
	t.Parallel()
	var allowing *AddressGuard
	for host, says := range map[string]string{
		"127.0.0.1": "", "[::1]": "", "localhost": "", "10.0.0.7": "",
		"127.1": "write 127.0.0.1", "0x7f000001": "write 127.0.0.1", "127.0.0.1.": "write 127.0.0.1", "1.2.3.256": "ends in a number",
	} {
		got := allowing.URLProblem(context.Background(), "http://"+host+"/in")
		if (says == "") != (got == "") || !strings.Contains(got, says) {
			t.Errorf("with --webhook-allow-private, %s: %q, want %q", host, got, says)
		}
	}
}
