package webhook

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/testkit"
)

func TestWebhookAttemptIsSignedAsStandardWebhooks(t *testing.T) {
	t.Parallel()
	rc := testkit.NewReceiver(t)
	old, current := NewSecret(), NewSecret()
	oldKey, _ := domain.WebhookSecretKey(old)
	currentKey, _ := domain.WebhookSecretKey(current)
	sender := NewSender(nil, "petstore/test", time.Now)
	body := []byte(`{"type":"webhook.test","timestamp":"2026-11-25T12:00:00Z","data":{}}`)

	tests := []struct {
		name    string
		keys    [][]byte
		trusted []string
	}{
		{"one secret", [][]byte{currentKey}, []string{current}},
		{"a rotation: the receiver still knows only the old secret", [][]byte{currentKey, oldKey}, []string{old}},
		{"a rotation: the receiver knows only the new secret", [][]byte{currentKey, oldKey}, []string{current}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc.Trust(tt.trusted...)
			r := sender.Send(context.Background(), Attempt{URL: rc.URL(), ID: "msg_test", Body: body, Keys: tt.keys})
			if !r.Delivered() || r.Status != http.StatusNoContent {
				t.Fatalf("attempt = %+v, want delivered with 204", r)
			}
			d := rc.Wait(i+1, 5*time.Second)[i]
			if !d.Verified {
				t.Fatalf("the receiver could not verify %+v", d)
			}
			if len(d.Signatures) != len(tt.keys) || d.ID != "msg_test" || d.Body != string(body) {
				t.Fatalf("delivery = %+v", d)
			}
			if !strings.HasPrefix(d.UserAgent, "petstore/") {
				t.Fatalf("user-agent %q", d.UserAgent)
			}
		})
	}
	t.Run("a secret the receiver does not know fails its check", func(t *testing.T) {
		rc.Trust(NewSecret())
		sender.Send(context.Background(), Attempt{URL: rc.URL(), ID: "msg_x", Body: body, Keys: [][]byte{currentKey}})
		got := rc.Wait(len(tests)+1, 5*time.Second)
		if got[len(got)-1].Verified {
			t.Fatal("a delivery signed with another secret was verified: the receiver's check is not a check")
		}
	})
}

func TestWebhookSecretShape(t *testing.T) {
	t.Parallel()
	s := NewSecret()
	key, err := domain.WebhookSecretKey(s)
	if !strings.HasPrefix(s, "whsec_") || err != nil || len(key) != 32 {
		t.Fatalf("secret %q: %d bytes, %v", s, len(key), err)
	}
	if s == NewSecret() {
		t.Fatal("two secrets are equal")
	}
}

// TestWebhookReceiversThatMisbehave: every answer but a whole 2xx within
// the bounds fails the attempt, and the attempt never reads more than it
// may or waits longer than its timeout.
func TestWebhookReceiversThatMisbehave(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("x", 1<<20)
	tests := []struct {
		name    string
		handler http.HandlerFunc
		status  int
		errHas  string
	}{
		{"a 500", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }, 500, "status 500"},
		{"a redirect is not followed", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, 302, "status 302"},
		{"a huge answer", func(w http.ResponseWriter, r *http.Request) {
			for range 64 {
				if _, err := w.Write([]byte(huge)); err != nil {
					return
				}
			}
		}, 200, "over 64 KiB"},
		{"headers, then nothing", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, 200, "no answer within"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			r := fastSender().Send(context.Background(), Attempt{URL: srv.URL + "/?token=hidden", ID: "msg_1", Body: []byte(`{}`)})
			if r.Delivered() || r.Status != tt.status || !strings.Contains(r.Err, tt.errHas) {
				t.Fatalf("attempt = %+v, want status %d and an error with %q", r, tt.status, tt.errHas)
			}
		})
	}

	t.Run("garbage instead of HTTP", func(t *testing.T) {
		addr := testkit.ServeTCP(t, "127.0.0.1:0", func(c net.Conn) { c.Write([]byte("this is not HTTP at all\r\n\r\n")) })
		r := fastSender().Send(context.Background(), Attempt{URL: "http://user:pw@" + addr + "/?token=hidden", ID: "m", Body: []byte(`{}`)})
		if r.Delivered() || r.Status != 0 {
			t.Fatalf("attempt = %+v", r)
		}
		for _, secret := range []string{"hidden", "pw", "token"} {
			if strings.Contains(r.Err, secret) {
				t.Fatalf("the error %q shows the URL's %q", r.Err, secret)
			}
		}
	})
	t.Run("a connection that never answers", func(t *testing.T) {
		addr := testkit.ServeTCP(t, "127.0.0.1:0", func(c net.Conn) { bufio.NewReader(c).ReadString(0) })
		start := time.Now()
		r := fastSender().Send(context.Background(), Attempt{URL: "http://" + addr + "/?token=hidden", ID: "m", Body: []byte(`{}`)})
		if r.Delivered() || !strings.Contains(r.Err, "no answer within") || time.Since(start) > 5*time.Second {
			t.Fatalf("attempt = %+v after %s", r, time.Since(start))
		}
		if strings.Contains(r.Err, "hidden") {
			t.Fatalf("the error %q shows the URL's query", r.Err)
		}
	})
}

// fastSender is a sender whose timeout a test can wait out.
func fastSender() *Sender {
	s := NewSender(nil, "petstore/test", time.Now)
	s.client.Timeout = 500 * time.Millisecond
	return s
}

func TestWebhookRefusesTheLocalNetwork(t *testing.T) {
	t.Parallel()
	rc := testkit.NewReceiver(t)
	sender := NewSender(NewAddressGuard(false), "petstore/test", time.Now)
	// localhost resolves to loopback: refused after DNS, not by its name.
	url := strings.Replace(rc.URL(), "127.0.0.1", "localhost", 1)
	r := sender.Send(context.Background(), Attempt{URL: url, ID: "m", Body: []byte(`{}`)})
	if r.Delivered() || !strings.Contains(r.Err, "--webhook-allow-private") || strings.Contains(r.Err, "127.0.0.1") {
		t.Fatalf("attempt = %+v, want refused without naming the address", r)
	}
	if len(rc.Deliveries()) != 0 {
		t.Fatal("the receiver on loopback got the delivery")
	}
}

// TestWebhookGuardRefusesThisHostAndLocalNetworks: the guard of a server
// without --webhook-allow-private refuses every address of this host or
// a local network, however it is written; with the flag it refuses none.
func TestWebhookGuardRefusesThisHostAndLocalNetworks(t *testing.T) {
	t.Parallel()
	// 198.51.100.7 stands for a public address of this host's own.
	guard := &AddressGuard{own: func() []netip.Addr { return []netip.Addr{netip.MustParseAddr("198.51.100.7")} }}
	for _, tt := range []struct {
		name, addr string
		refused    bool
	}{
		{"IPv4 loopback", "127.0.0.1", true},
		{"another IPv4 loopback", "127.8.9.10", true},
		{"IPv6 loopback", "::1", true},
		{"RFC 1918 10/8", "10.1.2.3", true},
		{"RFC 1918 172.16/12", "172.16.0.1", true},
		{"RFC 1918 192.168/16", "192.168.1.1", true},
		{"shared address space", "100.64.0.1", true},
		{"link-local, the cloud metadata address", "169.254.169.254", true},
		{"IPv6 link-local", "fe80::1", true},
		{"unique-local", "fd00::1", true},
		{"unspecified IPv4", "0.0.0.0", true},
		{"0.0.0.0/8, which Linux takes for this host", "0.1.2.3", true},
		{"unspecified IPv6", "::", true},
		{"IPv4-mapped loopback", "::ffff:127.0.0.1", true},
		{"multicast", "224.0.0.1", true},
		{"this host's own public address", "198.51.100.7", true},
		{"this host's own address, IPv4-mapped", "::ffff:198.51.100.7", true},
		{"NAT64 of loopback", "64:ff9b::7f00:1", true},
		{"NAT64 of the metadata address", "64:ff9b::a9fe:a9fe", true},
		{"NAT64 of a private address", "64:ff9b::a00:1", true},
		{"NAT64 of this host's own address", "64:ff9b::c633:6407", true},
		{"local-use NAT64", "64:ff9b:1::808:808", true},
		{"IPv4-compatible loopback", "::127.0.0.1", true},
		{"IPv4-translated loopback", "::ffff:0:127.0.0.1", true},
		{"6to4 of loopback", "2002:7f00:1::", true},
		{"6to4 of the metadata address", "2002:a9fe:a9fe::1", true},
		{"Teredo of loopback", "2001:0:4136:e378:8000:63bf:80ff:fffe", true},
		{"a link-local address with its zone", "fe80::1%eth0", true},
		{"a public IPv4 address", "203.0.113.7", false},
		{"another public IPv4 address", "8.8.8.8", false},
		{"a public IPv6 address", "2001:db8::1", false},
		{"just past 172.16/12", "172.32.0.1", false},
		{"just past 0.0.0.0/8", "1.0.0.1", false},
		{"NAT64 of a public address", "64:ff9b::808:808", false},
		{"6to4 of a public address", "2002:808:808::1", false},
		{"IPv4-compatible public address", "::8.8.8.8", false},
		{"Teredo of a public address", "2001:0:4136:e378:8000:63bf:f7f7:f7f7", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := netip.MustParseAddr(tt.addr)
			if got := guard.refused(addr); got != tt.refused {
				t.Errorf("refused(%s) = %v, want %v", tt.addr, got, tt.refused)
			}
			err := guard.control("tcp", netip.AddrPortFrom(addr, 443).String(), nil)
			if (err != nil) != tt.refused || (err != nil && strings.Contains(err.Error(), tt.addr)) {
				t.Errorf("the dialer's check of %s: %v", tt.addr, err)
			}
			var allowed *AddressGuard // --webhook-allow-private
			if allowed.refused(addr) || allowed.control("tcp", netip.AddrPortFrom(addr, 443).String(), nil) != nil {
				t.Errorf("with --webhook-allow-private, %s is refused", tt.addr)
			}
		})
	}
	// The host's real addresses are its own.
	for _, own := range interfaceAddrs() {
		if !NewAddressGuard(false).refused(own) {
			t.Errorf("this host's address %s is not refused", own)
		}
	}
}

func TestWebhookRetrySchedule(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	want := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
	for i, w := range want {
		for _, jitter := range []float64{-1, 0, 1} {
			at, ok := nextRetry(i+1, now, 0, jitter)
			got := at.Sub(now)
			exact := w + time.Duration(float64(w)*0.1*jitter)
			if !ok || got != exact {
				t.Errorf("after attempt %d with jitter %v: %s, %v; want %s", i+1, jitter, got, ok, exact)
			}
		}
	}
	if _, ok := nextRetry(len(want)+1, now, 0, 0); ok {
		t.Error("an eighth failure is retried; want the delivery failed")
	}
	if at, _ := nextRetry(1, now, time.Hour, 0); at.Sub(now) != time.Hour {
		t.Errorf("Retry-After of an hour after the first attempt: retried after %s", at.Sub(now))
	}
	if at, _ := nextRetry(5, now, time.Minute, 0); at.Sub(now) != 5*time.Hour {
		t.Errorf("a Retry-After shorter than the schedule moved it: %s", at.Sub(now))
	}

	for _, tt := range []struct {
		header string
		want   time.Duration
	}{
		{"", 0}, {"120", 2 * time.Minute}, {"-5", 0}, {"soon", 0}, {"999999999", 24 * time.Hour},
		{now.Add(time.Hour).Format(http.TimeFormat), time.Hour}, {now.Add(-time.Hour).Format(http.TimeFormat), 0},
		{now.Add(48 * time.Hour).Format(http.TimeFormat), 24 * time.Hour},
	} {
		if got := retryAfter(tt.header, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %s, want %s", tt.header, got, tt.want)
		}
	}
}

func TestWebhookURLs(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		url     string
		problem string
	}{
		{"https://hooks.example.com/petstore", ""},
		{"http://10.0.0.5:8080/in?token=x", ""},
		{"ftp://example.com/", "http or https"},
		{"example.com/hooks", "http or https"},
		{"https:///nohost", "host"},
		{"mailto:a@example.com", "absolute"},
		{"https://example.com/" + strings.Repeat("a", 2100), "at most"},
	} {
		got := URLProblem(tt.url)
		if (tt.problem == "") != (got == "") || !strings.Contains(got, tt.problem) {
			t.Errorf("webhookURLProblem(%q) = %q, want %q", tt.url, got, tt.problem)
		}
	}
	if got := domain.ShownURL("https://user:secret@example.com:8443/a/b?token=s3cret#x"); got != "https://example.com:8443/a/b" {
		t.Errorf("shownURL = %q", got)
	}
}

// TestWebhookAttemptErrorKeepsNothingOfTheReceiver: an attempt's error
// (an endpoint's lastError) says the kind of failure and keeps the status,
// but no byte the receiver sent and not the address its name resolved to.
func TestWebhookAttemptErrorKeepsNothingOfTheReceiver(t *testing.T) {
	t.Parallel()
	const banner = "internal-secret-banner-XYZ"
	for _, tt := range []struct {
		name   string
		answer string // "" closes the connection without a byte
		status int
		says   string
	}{
		{"a bare banner", banner + "\r\n", 0, "not HTTP"},
		{"a banner as the status", "HTTP/1.1 " + banner + "\r\n\r\n", 0, "not HTTP"},
		{"a banner as the status code", "HTTP/1.1 99" + banner + " OK\r\n\r\n", 0, "not HTTP"},
		{"an SSH banner", "SSH-2.0-" + banner + "\r\n", 0, "not HTTP"},
		{"a banner as a header", "HTTP/1.1 200 OK\r\n" + banner + "\r\n\r\n", 0, "not HTTP"},
		{"a 500 that names the banner", "HTTP/1.1 500 " + banner + "\r\nContent-Length: 6\r\n\r\n" + banner[:6], 500, "status 500"},
		{"a body cut short", "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + banner, 200, "closed the connection"},
		{"nothing at all", "", 0, "closed the connection"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := testkit.ServeTCP(t, "127.0.0.1:0", func(c net.Conn) {
				bufio.NewReader(c).ReadString('\n')
				c.Write([]byte(tt.answer))
			})
			_, port, _ := net.SplitHostPort(addr)
			r := fastSender().Send(context.Background(), Attempt{URL: "http://localhost:" + port + "/in", ID: "m", Body: []byte(`{}`)})
			if r.Delivered() || r.Status != tt.status || !strings.Contains(r.Err, tt.says) {
				t.Fatalf("attempt = %+v, want status %d and an error that says %q", r, tt.status, tt.says)
			}
			for _, echoed := range []string{"banner", "XYZ", "SSH", "127.0.0.1", "::1", port} {
				if strings.Contains(r.Err, echoed) {
					t.Fatalf("the error %q holds %q", r.Err, echoed)
				}
			}
		})
	}
	t.Run("a connection refused at the address a name resolved to", func(t *testing.T) {
		_, port, _ := net.SplitHostPort(testkit.FreeAddr(t))
		r := fastSender().Send(context.Background(), Attempt{URL: "http://localhost:" + port + "/in", ID: "m", Body: []byte(`{}`)})
		if r.Delivered() || r.Err != "the receiver refused the connection" {
			t.Fatalf("attempt = %+v, want refused, without the address", r)
		}
	})
}
