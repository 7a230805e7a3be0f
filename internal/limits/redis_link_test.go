package limits

import (
	"testing"
	"time"
)

// The limiter's Redis waits 100 ms for each step unless the --redis URL
// says otherwise (docs/replicas.md), and never retries a script.
func TestRedisOptionsTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		url                     string
		dial, read, write, pool time.Duration
	}{
		{"a plain URL waits 100 ms for each", "redis://127.0.0.1:6379/0", redisTimeout, redisTimeout, redisTimeout, redisTimeout},
		{"the URL's own read_timeout wins", "redis://127.0.0.1:6379/0?read_timeout=300ms", redisTimeout, 300 * time.Millisecond, redisTimeout, redisTimeout},
		{"every timeout of the URL wins", "redis://127.0.0.1:6379/0?dial_timeout=1s&read_timeout=2s&write_timeout=3s&pool_timeout=4s",
			time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := RedisOptions(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if opts.DialTimeout != tc.dial || opts.ReadTimeout != tc.read || opts.WriteTimeout != tc.write || opts.PoolTimeout != tc.pool {
				t.Errorf("dial %v, read %v, write %v, pool %v; want %v, %v, %v, %v",
					opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout, tc.dial, tc.read, tc.write, tc.pool)
			}
			if opts.MaxRetries != -1 {
				t.Errorf("MaxRetries %d, want -1: a retried script could count a request twice", opts.MaxRetries)
			}
		})
	}
}
