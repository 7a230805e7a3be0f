package server

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"petstore/internal/domain"
	"petstore/internal/manage"
	"petstore/internal/testkit"
	"petstore/internal/webhook"
)

// The receivers docs/webhooks.md shows, held to what the tests run: the
// Node receiver is testdata/webhooks-node/receiver.mjs, which runs here
// under node against real deliveries; the Go check is verifyWebhook, with
// which the tests' receiver verifies every delivery.

const nodeReceiver = "../../testdata/webhooks-node"

// docBlock is the text of the fenced block of lang in page; t fails
// unless there is exactly one.
func docBlock(t *testing.T, page, lang string) string {
	t.Helper()
	parts := strings.Split(page, "```"+lang+"\n")
	if len(parts) != 2 {
		t.Fatalf("docs/webhooks.md has %d blocks of %s, want 1", len(parts)-1, lang)
	}
	block, _, _ := strings.Cut(parts[1], "```")
	return block
}

func TestDocsWebhookExamplesAreTheTestedOnes(t *testing.T) {
	t.Parallel()
	page := readFile(t, "../../docs/webhooks.md")
	if docBlock(t, page, "js") != readFile(t, filepath.Join(nodeReceiver, "receiver.mjs")) {
		t.Errorf("the Node example of docs/webhooks.md is not %s/receiver.mjs, word for word", nodeReceiver)
	}
	goBlock := docBlock(t, page, "go")
	fn := goBlock[strings.Index(goBlock, "func verifyWebhook("):]
	if !strings.HasPrefix(fn, "func verifyWebhook(") || !strings.Contains(readFile(t, "../testkit/receiver.go"), fn) {
		t.Errorf("the Go example of docs/webhooks.md is not verifyWebhook of internal/testkit/receiver.go, word for word:\n%s", fn)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWebhookNodeReceiverVerifiesRealDeliveries: the Node receiver of the
// docs, with standardwebhooks from npm as its package-lock pins it,
// verifies a server's deliveries (during a rotation too) and refuses one
// signed with another secret.
func TestWebhookNodeReceiverVerifiesRealDeliveries(t *testing.T) {
	t.Parallel()
	node, npm := nodeAndNPM(t)
	dir := t.TempDir()
	for _, name := range []string{"package.json", "package-lock.json", "receiver.mjs"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(readFile(t, filepath.Join(nodeReceiver, name))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts")
	install.Dir = dir
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in a copy of %s: %v\n%s", nodeReceiver, err, out)
	}

	s := webhookServer(t, testOptions{})
	addr := testkit.FreeAddr(t)
	terms, err := manage.NewEndpointTerms("http://"+addr+"/petstore", nil)
	if err != nil {
		t.Fatal(err)
	}
	e, err := s.store.AddWebhookEndpoint(ctx, terms, testActor, s.opts.env)
	if err != nil {
		t.Fatal(err)
	}
	lines := startNodeReceiver(t, node, dir, addr, e.Secret)

	sent, err := manage.QueueTest(ctx, s.store, s.env, e.ID, testActor, s.clock.now())
	if err != nil {
		t.Fatal(err)
	}
	s.deliverDue()
	wantLine(t, lines, "verified "+sent.ID+" webhook.test")
	if d := s.deliveryOf(sent.ID); d.State != domain.DeliveryDelivered || d.LastStatus != http.StatusNoContent {
		t.Fatalf("the delivery to the Node receiver: %+v", d)
	}

	// During a rotation's overlap the receiver still knows only the old
	// secret: one of the two signatures matches.
	if _, err := s.store.RotateWebhookSecret(ctx, e.ID, webhook.NewSecret(), time.Hour, testActor, s.opts.env); err != nil {
		t.Fatal(err)
	}
	s.mustCreate(s.keyTerms("pro"))
	s.deliverDue()
	wantLine(t, lines, " key.created ")

	// A delivery signed with a secret the receiver does not know.
	forged := webhook.NewSender(nil, "petstore/test", time.Now)
	key, _ := domain.WebhookSecretKey(webhook.NewSecret())
	r := forged.Send(ctx, webhook.Attempt{URL: "http://" + addr + "/petstore", ID: "msg_forged", Body: []byte(`{"type":"webhook.test"}`), Keys: [][]byte{key}})
	if r.Status != http.StatusBadRequest {
		t.Fatalf("a forged delivery: %+v, want 400", r)
	}
	wantLine(t, lines, "refused msg_forged: No matching signature found")
}

// nodeAndNPM finds node and npm, or skips the test when they are not
// installed and not required (PETSTORE_TEST_NODE=1, as .ci/run sets it).
func nodeAndNPM(t *testing.T) (node, npm string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNPM := exec.LookPath("npm")
	switch {
	case errNode == nil && errNPM == nil:
		return node, npm
	case os.Getenv("PETSTORE_TEST_NODE") == "1":
		t.Fatal("PETSTORE_TEST_NODE=1 and no node or npm on PATH: install them (apt-get install nodejs npm)")
	default:
		t.Skip("no node or npm on PATH (apt-get install nodejs npm); PETSTORE_TEST_NODE=1 makes this a failure")
	}
	return "", ""
}

// startNodeReceiver runs receiver.mjs of dir on addr with secret, until the
// test ends, and returns its lines of standard output once it listens.
func startNodeReceiver(t *testing.T, node, dir, addr, secret string) <-chan string {
	t.Helper()
	_, port, _ := strings.Cut(addr, ":")
	cmd := exec.CommandContext(t.Context(), node, "receiver.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PORT="+port, "PETSTORE_WEBHOOK_SECRET="+secret)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		for sc := bufio.NewScanner(out); sc.Scan(); {
			lines <- sc.Text()
		}
	}()
	wantLine(t, lines, "listening")
	return lines
}

// wantLine waits for a line of lines that holds want.
func wantLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the Node receiver ended before it printed %q", want)
			}
			if strings.Contains(line, want) {
				return
			}
		case <-deadline:
			t.Fatalf("the Node receiver did not print %q within 10 s", want)
		}
	}
}
