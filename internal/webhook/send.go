// Package webhook sends the service's notices as Standard Webhooks 1.0
// (docs/webhooks.md): the signature, one attempt over a bounded HTTP client
// whose guard refuses the local network at dial time (after DNS), when to
// try again, and the worker that claims due deliveries from the outbox,
// sends them, records what came of each, and queues the keys' expiry
// notices.
//
// Of the project it imports the domain (the outbox is the domain's
// WebhookOutbox, which the store implements, and the metrics reach it as a
// plain function) and tracing, which reads the trace context the outbox
// keeps of what queued each event.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"petstore/internal/domain"

	"go.opentelemetry.io/otel/propagation"
)

// One attempt of a delivery: docs/webhooks.md, "Verifying a delivery".

const (
	// attemptTimeout bounds an attempt from the dial to the last byte read.
	attemptTimeout = 15 * time.Second
	// webhookMaxAnswer is the most of an answer read; a longer one fails
	// the attempt, so a receiver cannot make a server read without end.
	webhookMaxAnswer = 64 << 10
	// maxRetryAfter caps how far a receiver's Retry-After pushes a retry.
	maxRetryAfter = 24 * time.Hour
)

// RetryDelays are the waits after each failed attempt: after the
// last, the delivery has failed.
var RetryDelays = []time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// NewSecret is a fresh endpoint secret: whsec_ and the base64 of 32
// random bytes, the form Standard Webhooks libraries take.
func NewSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return domain.WebhookSecretPrefix + base64.StdEncoding.EncodeToString(b[:])
}

// webhookSignature is the webhook-signature header of a message: for each
// key, v1, and the base64 HMAC-SHA256 of id.timestamp.body; space-separated.
func webhookSignature(id string, timestamp int64, body []byte, keys ...[]byte) string {
	var b strings.Builder
	for i, key := range keys {
		mac := hmac.New(sha256.New, key)
		fmt.Fprintf(mac, "%s.%d.", id, timestamp)
		mac.Write(body)
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	}
	return b.String()
}

// Attempt is one POST of an event to an endpoint.
type Attempt struct {
	URL  string
	ID   string // webhook-id: the event's, the same on every retry
	Body []byte
	Keys [][]byte // the endpoint's secret keys: two during a rotation's overlap
}

// attemptResult is what an attempt came to: the answer's status (0 for no
// answer), why it failed (empty when delivered), and the wait its
// Retry-After asked for.
type attemptResult struct {
	Status     int
	Err        string
	RetryAfter time.Duration
}

func (r attemptResult) Delivered() bool { return r.Err == "" }

// Sender makes attempts with one client: no redirects, no proxy, and
// each address it connects to checked by the guard, after DNS.
type Sender struct {
	client    *http.Client
	userAgent string
	now       func() time.Time
}

func NewSender(guard *AddressGuard, userAgent string, now func() time.Time) *Sender {
	dialer := &net.Dialer{Timeout: attemptTimeout, KeepAlive: 30 * time.Second, Control: guard.control}
	return &Sender{userAgent: userAgent, now: now, client: &http.Client{
		Timeout:       attemptTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Transport: &http.Transport{
			Proxy:                  nil, // a proxy would dial for us, past the check
			DialContext:            dialer.DialContext,
			TLSHandshakeTimeout:    10 * time.Second,
			ResponseHeaderTimeout:  attemptTimeout,
			MaxIdleConnsPerHost:    domain.MaxInFlightPerEndpoint,
			IdleConnTimeout:        90 * time.Second,
			MaxResponseHeaderBytes: 16 << 10,
		},
	}}
}

// Send makes one attempt. Its error never holds the URL's user info or
// query, nor anything of the secret.
func (s *Sender) Send(ctx context.Context, a Attempt) attemptResult {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL, bytes.NewReader(a.Body))
	if err != nil {
		return attemptResult{Err: "not a URL this server can send to"}
	}
	timestamp := s.now().Unix()
	h := req.Header
	h["Content-Type"] = []string{"application/json"}
	h["User-Agent"] = []string{s.userAgent}
	h["Webhook-Id"] = []string{a.ID}
	h["Webhook-Timestamp"] = []string{strconv.FormatInt(timestamp, 10)}
	h["Webhook-Signature"] = []string{webhookSignature(a.ID, timestamp, a.Body, a.Keys...)}
	// The attempt's span, when tracing is on (trace.go): a receiver that
	// traces sees the delivery inside its own trace. Without one, nothing.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	resp, err := s.client.Do(req)
	if err != nil {
		return attemptResult{Err: attemptError(err, s.now())}
	}
	defer resp.Body.Close()
	r := attemptResult{Status: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), s.now())}
	n, err := io.Copy(io.Discard, io.LimitReader(resp.Body, webhookMaxAnswer+1))
	switch {
	case err != nil:
		r.Err = fmt.Sprintf("status %d, then reading the answer: %s", r.Status, attemptError(err, s.now()))
	case n > webhookMaxAnswer:
		r.Err = fmt.Sprintf("status %d with an answer over %d KiB", r.Status, webhookMaxAnswer>>10)
	case r.Status < 200 || r.Status > 299:
		r.Err = fmt.Sprintf("status %d", r.Status)
	}
	return r
}

// attemptError says what kind of failure ended an attempt without an
// answer. It keeps no byte that came from the receiver (a banner, a
// malformed status line), nor the address its name resolved to, nor the
// URL the client's errors quote (its user info and query may be secrets).
// now tells an expired certificate from one not valid yet.
func attemptError(err error, now time.Time) string {
	var ne net.Error
	var dns *net.DNSError
	var certificate *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	var alert tls.AlertError
	var op *net.OpError
	switch {
	case errors.Is(err, errLocalNetwork):
		return errLocalNetwork.Error()
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()):
		return fmt.Sprintf("no answer within %s", attemptTimeout)
	case errors.As(err, &dns):
		return "the receiver's host name did not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "the receiver refused the connection"
	case errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH):
		return "the receiver's network is unreachable"
	case errors.As(err, &certificate):
		return certificateProblem(certificate, now)
	case errors.As(err, &record):
		return "the receiver does not speak TLS there"
	case errors.As(err, &op) && op.Op == "remote error":
		// A TLS alert the receiver sent, by Go's name of it (of a fixed
		// set): never the receiver's text.
		return "the receiver ended the TLS handshake (alert: " + strings.TrimPrefix(op.Err.Error(), "tls: ") + ")"
	case errors.As(err, &alert):
		return "the receiver ended the TLS handshake (alert: " + strings.TrimPrefix(alert.Error(), "tls: ") + ")"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE):
		return "the receiver closed the connection before a whole answer"
	case strings.Contains(err.Error(), "malformed HTTP") || strings.Contains(err.Error(), "malformed MIME"):
		// net/http's errors of an answer that is not HTTP have no type of
		// their own: their text quotes the answer, which is not kept.
		return "the answer was not HTTP"
	}
	return "the attempt failed before a whole HTTP answer"
}

// certificateProblem says, in our words, why the receiver's certificate
// was refused: never a name or a byte of the certificate.
func certificateProblem(e *tls.CertificateVerificationError, now time.Time) string {
	const prefix = "the receiver's TLS certificate "
	var authority x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var algorithm x509.InsecureAlgorithmError
	switch {
	case errors.As(e.Err, &authority):
		return prefix + "is signed by an unknown authority"
	case errors.As(e.Err, &hostname):
		return prefix + "is for another name"
	case errors.As(e.Err, &algorithm):
		return prefix + "is signed with an insecure algorithm (" + x509.SignatureAlgorithm(algorithm).String() + ")"
	case errors.As(e.Err, &invalid) && invalid.Reason == x509.Expired:
		if len(e.UnverifiedCertificates) > 0 && now.Before(e.UnverifiedCertificates[0].NotBefore) {
			return prefix + "is not valid yet"
		}
		return prefix + "has expired"
	case errors.As(e.Err, &invalid) && invalid.Reason == x509.IncompatibleUsage:
		return prefix + "is not for a TLS server (its extended key usage)"
	case errors.As(e.Err, &invalid):
		return prefix + "is not valid (its chain breaks a rule of X.509)"
	}
	return prefix + "was not accepted"
}

// retryAfter reads a Retry-After header: seconds or an HTTP date; 0 when
// absent or unreadable.
func retryAfter(h string, now time.Time) time.Duration {
	if h == "" {
		return 0
	}
	if s, err := strconv.ParseInt(h, 10, 64); err == nil {
		return time.Duration(min(max(s, 0), int64(maxRetryAfter/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(h); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}

// nextRetry is when to try again after attempts failed attempts, the last
// answered with a Retry-After of asked: the schedule's wait, moved by
// jitter (from -1 to 1, for ±10%), or later when asked says so, up to 24 h.
// ok is false when the schedule is over: the delivery has failed.
func nextRetry(attempts int, now time.Time, asked time.Duration, jitter float64) (_ time.Time, ok bool) {
	if attempts < 1 || attempts > len(RetryDelays) {
		return time.Time{}, false
	}
	wait := RetryDelays[attempts-1]
	wait += time.Duration(float64(wait) * 0.1 * jitter)
	if asked > wait {
		wait = min(asked, maxRetryAfter)
	}
	return now.Add(wait), true
}

// URLProblem says what is wrong with an endpoint URL, or "".
func URLProblem(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Opaque != "":
		return "url must be an absolute http or https URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "url must be an http or https URL"
	case u.Host == "" || u.Hostname() == "":
		return "url must name a host"
	case len(raw) > maxWebhookURL:
		return fmt.Sprintf("url must be at most %d characters", maxWebhookURL)
	case u.Fragment != "":
		return "url must not have a fragment"
	}
	return ""
}

const maxWebhookURL = 2048

var errLocalNetwork = errors.New("the receiver's address is on this host or a local network " +
	"(loopback, private, link-local, unique-local, or an IPv6 form of one; a server started with --webhook-allow-private may send there)")

// AddressGuard refuses the addresses a webhook may not reach
// (docs/webhooks.md, "Delivery and retries"): the sender checks each address
// it connects to, after DNS, and the admin API an endpoint's URL when it is
// added. A nil *AddressGuard, a server's with --webhook-allow-private,
// refuses none.
type AddressGuard struct {
	// own lists the host's own addresses, asked at each check: a public
	// address of this host is this host all the same.
	own func() []netip.Addr
	// lookup resolves a name at registration: net.DefaultResolver's.
	lookup func(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// NewAddressGuard is the guard of a server started with allowPrivate
// (nil) or without it.
func NewAddressGuard(allowPrivate bool) *AddressGuard {
	if allowPrivate {
		return nil
	}
	return &AddressGuard{own: interfaceAddrs, lookup: net.DefaultResolver.LookupNetIP}
}

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
	// nat64Local, the local-use NAT64 prefix of RFC 8215, is a local
	// network as a whole.
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	// The IPv6 addresses that carry an IPv4 address, where, and XORed with
	// what (Teredo's client): NAT64 (RFC 6052), IPv4-translated (RFC 2765),
	// IPv4-compatible (RFC 4291's deprecated ::a.b.c.d), 6to4 (RFC 3056)
	// and Teredo (RFC 4380). IPv4-mapped ones are unmapped before.
	carriers = []struct {
		prefix netip.Prefix
		at     int
		xor    byte
	}{
		{netip.MustParsePrefix("64:ff9b::/96"), 12, 0},
		{netip.MustParsePrefix("::ffff:0:0:0/96"), 12, 0},
		{netip.MustParsePrefix("::/96"), 12, 0},
		{netip.MustParsePrefix("2002::/16"), 2, 0},
		{netip.MustParsePrefix("2001::/32"), 12, 0xff},
	}
)

// carried is the IPv4 address an IPv6 address carries, or addr itself.
func carried(addr netip.Addr) netip.Addr {
	addr = addr.Unmap()
	for _, c := range carriers {
		if c.prefix.Contains(addr) {
			b := addr.As16()
			return netip.AddrFrom4([4]byte{b[c.at] ^ c.xor, b[c.at+1] ^ c.xor, b[c.at+2] ^ c.xor, b[c.at+3] ^ c.xor})
		}
	}
	return addr
}

// refused tells whether addr is one a webhook may not reach: loopback,
// private (RFC 1918 and IPv6 unique-local), shared, link-local,
// unspecified or multicast, in 0.0.0.0/8, one of the host's own, or an
// IPv6 address that carries any of these (IPv4-mapped, NAT64, 6to4...).
func (g *AddressGuard) refused(addr netip.Addr) bool {
	if g == nil {
		return false
	}
	addr = carried(addr.WithZone(""))
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
// to raw (an endpoint URL URLProblem accepts): its host is, or resolves
// to, a refused address; or it is an IPv4 address in a form the server
// would look up as a name (127.1, 0x7f000001), or no address at all
// though it ends in a number. An address in any form, and localhost, are
// read without DNS; a name that does not resolve now is no problem: the
// sender checks again at each attempt.
func (g *AddressGuard) URLProblem(ctx context.Context, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	host := u.Hostname()
	addr, kind := readHost(host)
	switch {
	case kind == hostBroken:
		return fmt.Sprintf("url's host %s ends in a number but is not an IP address", host)
	case kind != hostName && g.refused(addr):
		if meant := carried(addr).String(); meant != host {
			host += " (" + meant + ")"
		}
		return localHostProblem(host)
	case kind == hostOtherForm:
		return fmt.Sprintf("url's host %s is the IPv4 address %s in another form, which a server would look up as a name: write %s", host, addr, addr)
	case kind == hostAddr || g == nil:
		return ""
	case isLocalhostName(host):
		return localHostProblem(host)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	addrs, _ := g.lookup(ctx, "ip", host)
	for _, a := range addrs {
		if g.refused(a) {
			return localHostProblem(host)
		}
	}
	return ""
}

func localHostProblem(host string) string {
	return fmt.Sprintf("url's host %s is on this host or a local network (loopback, private, link-local, "+
		"unique-local, or an IPv6 form of one): a server sends there only when started with --webhook-allow-private", host)
}
