package testkit

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The tests' Redis: PETSTORE_TEST_REDIS when set, or else a private
// redis-server of this test binary's own, started on first use.

// RedisURL is the tests' Redis; without one the test is skipped.
func RedisURL(t testing.TB) string {
	t.Helper()
	if u := os.Getenv("PETSTORE_TEST_REDIS"); u != "" {
		return u
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("the Redis tests need redis-server on the PATH (Debian: apt-get install redis-server), " +
			"or PETSTORE_TEST_REDIS=redis://HOST:PORT/N naming a Redis")
	}
	return privateRedis.started(t, startPrivateRedis)
}

// PatientRedisURL is raw with its round trips allowed 2 s instead of the
// limiter's 100 ms (the URL's own timeouts win, docs/replicas.md): a test
// server counts what the limiter counts, and on a busy machine a starved
// round trip past 100 ms made one fall back and count alone for a moment,
// as it should while Redis does not answer. A test of the fallback cuts
// Redis off through a proxy that drops or stalls: a drop is refused at
// once, whatever the timeouts; a stall needs the limiter's own.
func PatientRedisURL(t testing.TB, raw string) string {
	t.Helper()
	return withQuery(t, raw, map[string]string{"dial_timeout": "2s", "read_timeout": "2s", "write_timeout": "2s", "pool_timeout": "2s"})
}

// privateRedis is the redis-server this test binary started, if any.
var privateRedis = privateServer{what: "redis-server"}

// startPrivateRedis starts redis-server on a free loopback port, in a
// directory of its own, keeping nothing on disk, and waits until it answers.
func startPrivateRedis() (string, error) {
	dir, err := os.MkdirTemp("", "petstore-test-redis-")
	if err != nil {
		return "", err
	}
	port, err := freeLoopbackPort()
	if err != nil {
		return "", err
	}
	err = privateRedis.watch(`redis-server --bind 127.0.0.1 --port "$1" --dir "$2" --save "" --appendonly no >/dev/null &
server=$!
read -r _
kill "$server"
wait "$server"
rm -rf "$2"`, nil, port, dir)
	if err != nil {
		return "", err
	}
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})
	defer client.Close()
	err = waitAnswering(10*time.Second, func() error { return client.Ping(context.Background()).Err() })
	if err != nil {
		return "", fmt.Errorf("redis-server on port %s does not answer: %v", port, err)
	}
	return "redis://127.0.0.1:" + port + "/0", nil
}

// RedisPrefix is a key prefix of the test's own, whose keys are deleted
// when it ends.
func RedisPrefix(t testing.TB) string {
	t.Helper()
	u := RedisURL(t)
	prefix := "petstore-test:" + rand.Text()[:12]
	t.Cleanup(func() { DeleteRedisKeys(t, u, prefix) })
	return prefix
}

// DeleteRedisKeys deletes every key under prefix, as a restart of a Redis
// that keeps nothing on disk does to them.
func DeleteRedisKeys(t testing.TB, redisURL, prefix string) {
	t.Helper()
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	ctx := context.Background()
	iter := client.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
	for iter.Next(ctx) {
		if err := client.Del(ctx, iter.Val()).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
}
