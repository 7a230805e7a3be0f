package testkit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
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
// checks every delivery as a Standard Webhooks receiver does, with the
// algorithm written out here rather than taken from the code under test,
// and keeps what it got. answer picks each answer's status (200 when nil).
type Receiver struct {
	t      *testing.T
	server *httptest.Server

	mu      sync.Mutex
	secrets []string // any one of them must have signed each delivery
	got     []Delivery
	answer  func(n int, d Delivery) int
	// retryAfter, when set, is the Retry-After of every answer.
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
	Event      struct {
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
		UserAgent: r.Header.Get("user-agent"), Body: string(body),
	}
	d.Timestamp, _ = strconv.ParseInt(r.Header.Get("webhook-timestamp"), 10, 64)
	rc.mu.Lock()
	d.Verified = r.Method == http.MethodPost && r.Header.Get("content-type") == "application/json" &&
		verifyStandardWebhook(rc.secrets, d.ID, r.Header.Get("webhook-timestamp"), body, d.Signatures, time.Now())
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

// verifyStandardWebhook is the Standard Webhooks check: the timestamp
// within five minutes of now, and one v1 signature equal to the base64
// HMAC-SHA256 of "id.timestamp.body" keyed with a secret's decoded bytes.
func verifyStandardWebhook(secrets []string, id, timestamp string, body []byte, signatures []string, now time.Time) bool {
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil || id == "" {
		return false
	}
	if d := now.Sub(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return false
	}
	for _, secret := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
		if err != nil {
			continue
		}
		mac := hmac.New(sha256.New, key)
		fmt.Fprintf(mac, "%s.%s.%s", id, timestamp, body)
		want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		for _, sig := range signatures {
			version, value, _ := strings.Cut(sig, ",")
			if version == "v1" && hmac.Equal([]byte(value), []byte(want)) {
				return true
			}
		}
	}
	return false
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
