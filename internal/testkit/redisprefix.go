package testkit

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/redis/go-redis/v9"
)

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
