package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// The one guard of the addresses a webhook may reach (docs/webhooks.md,
// "Delivery and retries"): the sender checks each address it connects to,
// after DNS, and the admin API checks an endpoint's URL when it is added.

// errLocalNetwork refuses an address on this host or its local network.
var errLocalNetwork = errors.New("the receiver's address is on this host or a local network " +
	"(loopback, private, link-local, unique-local, or NAT64 of one; a server started with --webhook-allow-private may send there)")

// AddressGuard refuses the addresses a webhook may not reach. A nil
// *AddressGuard, a server's with --webhook-allow-private, refuses none.
type AddressGuard struct {
	// own lists the host's own addresses, asked at each check: a public
	// address of this host is this host all the same.
	own func() []netip.Addr
}

// NewAddressGuard is the guard of a server started with allowPrivate
// (nil) or without it.
func NewAddressGuard(allowPrivate bool) *AddressGuard {
	if allowPrivate {
		return nil
	}
	return &AddressGuard{own: interfaceAddrs}
}

// interfaceAddrs are the addresses of this host's interfaces.
func interfaceAddrs() []netip.Addr {
	addrs, _ := net.InterfaceAddrs()
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out
}

var (
	// sharedAddressSpace is RFC 6598's carrier-grade NAT range, private in
	// all but name; thisNetwork is RFC 1122's 0.0.0.0/8, which Linux takes
	// for this host.
	sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")
	thisNetwork        = netip.MustParsePrefix("0.0.0.0/8")
	// nat64 wraps an IPv4 address in its last 32 bits (RFC 6052); the
	// local-use prefix of RFC 8215 is a local network as a whole.
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
)

// refused tells whether addr is one a webhook may not reach: loopback,
// private (RFC 1918 and IPv6 unique-local), shared, link-local,
// unspecified or multicast, in 0.0.0.0/8, one of the host's own, or NAT64
// of any of these.
func (g *AddressGuard) refused(addr netip.Addr) bool {
	if g == nil {
		return false
	}
	addr = addr.Unmap()
	if nat64.Contains(addr) {
		b := addr.As16()
		addr = netip.AddrFrom4([4]byte(b[12:]))
	}
	if addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() || addr.IsLinkLocalMulticast() ||
		addr.IsInterfaceLocalMulticast() || addr.IsMulticast() || addr.IsUnspecified() ||
		sharedAddressSpace.Contains(addr) || thisNetwork.Contains(addr) || nat64Local.Contains(addr) {
		return true
	}
	for _, own := range g.own() {
		if own.Unmap() == addr {
			return true
		}
	}
	return false
}

// control is the dialer's check of each address it connects to, after
// DNS: a name that resolves to a refused address is refused too. The error
// does not name the address.
func (g *AddressGuard) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil || g.refused(ap.Addr()) {
		return fmt.Errorf("dial %s: %w", network, errLocalNetwork)
	}
	return nil
}

// URLProblem says why a server with this guard would refuse every delivery
// to raw (an endpoint URL webhookURLProblem accepts): its host is, or
// resolves to, a refused address. A name that does not resolve now is no
// problem: the sender checks again at each attempt.
func (g *AddressGuard) URLProblem(ctx context.Context, raw string) string {
	u, err := url.Parse(raw)
	if g == nil || err != nil {
		return ""
	}
	host := u.Hostname()
	addrs := []netip.Addr{}
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, a)
	} else {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		addrs, _ = net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	}
	for _, a := range addrs {
		if g.refused(a) {
			return fmt.Sprintf("url's host %s is on this host or a local network (loopback, private, link-local, "+
				"unique-local, or NAT64 of one): a server sends there only when started with --webhook-allow-private", host)
		}
	}
	return ""
}
