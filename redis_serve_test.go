package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"petstore/internal/testkit"
)

func TestServeRefusesABadRedisURL(t *testing.T) {
	db := t.TempDir() + "/petstore.db"
	for _, bad := range []string{"http://127.0.0.1:6379", "redis://user:secret@[::1", "redis://127.0.0.1:6379/x"} {
		for _, res := range []cliResult{
			viaRun(t, nil, "serve", "--db", db, "--redis", bad),
			viaRun(t, map[string]string{"PETSTORE_REDIS": bad}, "serve", "--db", db),
		} {
			wantFailure(t, res, 2)
			if !strings.Contains(res.Stderr, "--redis") || strings.Contains(res.Stderr, "secret") {
				t.Errorf("--redis %s: stderr %q, want a line about --redis without the password", bad, res.Stderr)
			}
		}
	}
	testkit.WantNoFile(t, db)
}

func TestServeStartsWhileRedisIsAway(t *testing.T) {
	closed := testkit.FreeAddr(t)
	db := t.TempDir() + "/petstore.db"
	ctx, cancel := context.WithCancel(context.Background())
	stderr := &testkit.SyncBuffer{}
	exited := make(chan struct{})
	go func() {
		run(ctx, []string{"petstore", "--addr", "127.0.0.1:0", "--db", db, "--redis", "redis://" + closed + "/0"},
			func(string) string { return "" }, strings.NewReader(""), io.Discard, stderr)
		close(exited)
	}()
	t.Cleanup(func() { cancel(); <-exited })
	base := testkit.WaitServing(t, stderr, exited)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	testkit.WaitHealthy(t, client, base)
	req, _ := http.NewRequest("GET", base+"/v1/pets", nil)
	req.Header.Set("Authorization", "Bearer "+testkit.BootstrapKeyIn(t, stderr.String()))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-RateLimit-Remaining") != "59" {
		t.Fatalf("GET /v1/pets: %d, Remaining %q; want 200 and 59", resp.StatusCode, resp.Header.Get("X-RateLimit-Remaining"))
	}
	if !strings.Contains(stderr.String(), "Redis does not answer") || !strings.Contains(stderr.String(), "limits=redis://"+closed+"/0") {
		t.Errorf("no warning that Redis is away, or the serving line does not name it:\n%s", stderr)
	}
}
