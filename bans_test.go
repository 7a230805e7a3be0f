package main

import "testing"

// sameBan tells whether two bans are the same ban, in the same state.
func sameBan(a, b ban) bool {
	return a.Subject == b.Subject && a.Since.Equal(b.Since) && a.Until.Equal(b.Until) && a.LiftedAt.Equal(b.LiftedAt)
}

func TestBanSubjects(t *testing.T) {
	tests := []struct {
		in, want string // want "" : refused
	}{
		{"key:13", "key:13"},
		{"address:203.0.113.7", "address:203.0.113.7"},
		{"address:::ffff:203.0.113.7", "address:203.0.113.7"},
		{"address:2001:db8:1:2:3:4:5:6", "address:2001:db8:1:2::/64"},
		{"address:2001:db8:1:2::/64", "address:2001:db8:1:2::/64"},
		{"address:2001:db8:1:2:ffff::/64", "address:2001:db8:1:2::/64"},
		{"address:fe80::1%eth0", "address:fe80::/64"},
		{"key:0", ""},
		{"key:-1", ""},
		{"key:x", ""},
		{"key:", ""},
		{"13", ""},
		{"address:", ""},
		{"address:203.0.113.0/24", ""},
		{"address:2001:db8::/48", ""},
		{"address:example.com", ""},
		{"user:1", ""},
		{"", ""},
	}
	for _, tc := range tests {
		id, err := parseBanSubject(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%q: read as %s, want it refused", tc.in, id)
		case tc.want != "" && err != nil:
			t.Errorf("%q: %v, want %s", tc.in, err, tc.want)
		case tc.want != "" && id.String() != tc.want:
			t.Errorf("%q: read as %s, want %s", tc.in, id, tc.want)
		}
	}
}
