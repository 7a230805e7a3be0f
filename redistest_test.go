package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The tests' Redis: PETSTORE_TEST_REDIS when set, or else a private
// redis-server of this test binary's own, started on first use.

// testRedisURL is the tests' Redis; without one the test is skipped.
func testRedisURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("PETSTORE_TEST_REDIS"); u != "" {
		return u
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("the Redis tests need redis-server on the PATH (Debian: apt-get install redis-server), " +
			"or PETSTORE_TEST_REDIS=redis://HOST:PORT/N naming a Redis")
	}
	privateRedis.once.Do(func() { privateRedis.url, privateRedis.err = startPrivateRedis() })
	if privateRedis.err != nil {
		t.Fatalf("a private redis-server for the tests: %v", privateRedis.err)
	}
	return privateRedis.url
}

// privateRedis is the redis-server this test binary started, if any.
var privateRedis struct {
	once sync.Once
	url  string
	err  error
	// stop is the watcher's standard input: when this binary exits, by
	// any means, it closes, and the watcher kills the server and removes
	// its directory. Held here so that it is never collected and closed.
	stop *os.File
}

// startPrivateRedis starts redis-server on a free loopback port, in a
// directory of its own, keeping nothing on disk, and waits until it answers.
func startPrivateRedis() (string, error) {
	dir, err := os.MkdirTemp("", "petstore-test-redis-")
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return "", err
	}
	watcher := exec.Command("sh", "-c", `redis-server --bind 127.0.0.1 --port "$1" --dir "$2" --save "" --appendonly no >/dev/null &
server=$!
read -r _
kill "$server"
wait "$server"
rm -rf "$2"`, "sh", port, dir)
	watcher.Stdin = r
	if err := watcher.Start(); err != nil {
		return "", err
	}
	r.Close()
	privateRedis.stop = w
	url := "redis://127.0.0.1:" + port + "/0"
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	defer client.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		err := client.Ping(context.Background()).Err()
		if err == nil {
			return url, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("redis-server on port %s does not answer: %v", port, err)
		}
	}
}
