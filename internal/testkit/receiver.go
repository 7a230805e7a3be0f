package testkit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Receiver is a webhook endpoint for the tests: a real HTTP server that
// checks every delivery with the Go example of docs/webhooks.md
// (verifyWebhook), and keeps what it got. answer picks each answer's status (200 when nil).
type Receiver struct {
	t      *testing.T
	server *httptest.Server

	mu      sync.Mutex
	secrets []string // any one of them must have signed each delivery
	got     []Delivery
	answer  func(n int, d Delivery) int
	// RetryAfter, when set, is the Retry-After of every answer.
	RetryAfter string
	arrived    chan struct{}
}

// Delivery is one request the receiver got, and what it found of it.
type Delivery struct {
	ID         string
	Timestamp  int64
	Signatures []string
	Verified   bool // a v1 signature matched one of the secrets
	UserAgent  string
	// Traceparent is the W3C header a server sends when it traces: the
	// attempt's span, for a receiver's own trace.
	Traceparent string
	Event       struct {
		Type      string         `json:"type"`
		Timestamp string         `json:"timestamp"`
		Data      map[string]any `json:"data"`
	}
	Body string
}

func NewReceiver(t *testing.T) *Receiver {
	rc := &Receiver{t: t, arrived: make(chan struct{}, 1000)}
	rc.server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.server.Close)
	return rc
}

// Trust sets the secrets that may sign deliveries.
func (rc *Receiver) Trust(secrets ...string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.secrets = secrets
}

func (rc *Receiver) AnswerWith(f func(n int, d Delivery) int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = f
}

func (rc *Receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d := Delivery{
		ID: r.Header.Get("webhook-id"), Signatures: strings.Fields(r.Header.Get("webhook-signature")),
		UserAgent: r.Header.Get("user-agent"), Traceparent: r.Header.Get("traceparent"), Body: string(body),
	}
	d.Timestamp, _ = strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	rc.mu.Lock()
	for _, secret := range rc.secrets {
		d.Verified = d.Verified || verifyWebhook(secret, r.Header, body, time.Now()) == nil
	}
	d.Verified = d.Verified && r.Method == http.MethodPost && r.Header.Get("content-type") == "application/json"
	if err := json.Unmarshal(body, &d.Event); err != nil {
		d.Verified = false
	}
	n := len(rc.got)
	rc.got = append(rc.got, d)
	answer, retryAfter := rc.answer, rc.RetryAfter
	rc.mu.Unlock()
	status := http.StatusNoContent
	if answer != nil {
		status = answer(n, d)
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	rc.arrived <- struct{}{}
}

// verifyWebhook is the Go example of docs/webhooks.md, word for word (a
// docs test holds them equal): the Standard Webhooks check, written out
// with crypto/hmac rather than taken from the code under test.
func verifyWebhook(secret string, header http.Header, body []byte, now time.Time) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	id, timestamp := header.Get("webhook-id"), header.Get("webhook-timestamp")
	sent, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || id == "" {
		return errors.New("no webhook-id or webhook-timestamp")
	}
	if age := now.Sub(time.Unix(sent, 0)); age > 5*time.Minute || age < -5*time.Minute {
		return errors.New("webhook-timestamp is more than five minutes away")
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, signature := range strings.Fields(header.Get("webhook-signature")) {
		if hmac.Equal([]byte(signature), []byte(want)) {
			return nil
		}
	}
	return errors.New("no webhook-signature matches")
}

// Wait waits until the receiver has got n deliveries in all, and returns
// them.
func (rc *Receiver) Wait(n int, within time.Duration) []Delivery {
	rc.t.Helper()
	deadline := time.After(within)
	for {
		if got := rc.Deliveries(); len(got) >= n {
			return got
		}
		select {
		case <-rc.arrived:
		case <-deadline:
			got := rc.Deliveries()
			rc.t.Fatalf("receiver got %d deliveries within %s, want %d: %+v", len(got), within, n, got)
			return nil
		}
	}
}

func (rc *Receiver) Deliveries() []Delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Delivery(nil), rc.got...)
}

func (rc *Receiver) URL() string { return rc.server.URL + "/hooks" }
