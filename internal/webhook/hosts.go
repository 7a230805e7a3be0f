package webhook

import (
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/text/unicode/norm"
)

// An endpoint URL's host is read the way browsers (the WHATWG URL
// standard), curl and inet_aton read it, so that no form of a refused
// address passes the check at registration as a name: 127.1, 2130706433,
// 0x7f000001, 0177.0.0.1 and 127.0.0.1. are all 127.0.0.1.

// hostKind is what an endpoint URL's host is.
type hostKind int

const (
	hostName      hostKind = iota // a name, which only DNS turns into addresses
	hostAddr                      // an IP address as a server dials it: a.b.c.d or IPv6
	hostOtherForm                 // an IPv4 address in another form, which the server would look up as a name
	hostBroken                    // ends in a number, as an IPv4 address does, but is none
)

// readHost reads host (a URL's Hostname: no brackets, percent-decoding
// done) after NFKC, which makes fullwidth digits and dots ASCII: the
// address it is, and which kind of host it is; an address only for
// hostAddr and hostOtherForm.
func readHost(host string) (netip.Addr, hostKind) {
	if strings.Contains(host, ":") {
		a, err := netip.ParseAddr(host)
		if err != nil {
			return netip.Addr{}, hostBroken
		}
		return a.WithZone(""), hostAddr
	}
	folded := strings.ReplaceAll(strings.ToLower(norm.NFKC.String(host)), "\u3002", ".") // the ideographic full stop, a dot to browsers
	parts := strings.Split(folded, ".")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1] // a trailing dot: the root, as in 127.0.0.1.
	}
	if !endsInNumber(parts[len(parts)-1]) {
		return netip.Addr{}, hostName
	}
	a, ok := ipv4Of(parts)
	switch {
	case !ok:
		return netip.Addr{}, hostBroken
	case a.String() == host:
		return a, hostAddr
	}
	return a, hostOtherForm
}

// ipv4Of reads the parts of a host that ends in a number as inet_aton
// does: up to four numbers, the last filling the bytes the others leave.
func ipv4Of(parts []string) (netip.Addr, bool) {
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v uint64
	for i, p := range parts {
		n, ok := ipv4Number(p)
		last := i == len(parts)-1
		if !ok || (!last && n > 255) || (last && n >= 1<<(8*(5-len(parts)))) {
			return netip.Addr{}, false
		}
		if last {
			v |= n
		} else {
			v |= n << (8 * (3 - i))
		}
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// ipv4Number reads one part of an IPv4 address in any of its bases: 0x
// and hexadecimal, 0 and octal, or decimal; "0x" alone is 0.
func ipv4Number(p string) (uint64, bool) {
	base := 10
	switch {
	case p == "0x":
		return 0, true
	case len(p) > 2 && p[0] == '0' && p[1] == 'x':
		p, base = p[2:], 16
	case len(p) > 1 && p[0] == '0':
		p, base = p[1:], 8
	}
	if p == "" {
		return 0, false
	}
	n, err := strconv.ParseUint(p, base, 32)
	return n, err == nil
}

// endsInNumber tells whether the last part of a host is a number, as
// the URL standard says: decimal digits, or 0x and hexadecimal digits. Such
// a host is an IPv4 address or no host at all, never a name.
func endsInNumber(last string) bool {
	digits, base := last, "0123456789"
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		digits, base = hex, "0123456789abcdef"
		if digits == "" {
			return true
		}
	}
	return digits != "" && strings.Trim(digits, base) == ""
}

// isLocalhostName tells whether host is localhost or a name under it,
// which RFC 6761 keeps for this host's loopback.
func isLocalhostName(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}
