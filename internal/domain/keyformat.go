package domain

import (
	"crypto/sha256"
	"hash/crc32"
)

// API keys look like psk_live_<32 random base62 chars><6-char checksum>
// (psk_test_ on staging). The checksum is the CRC32 of everything before it,
// in base62: a mistyped or made-up key is refused without a database look-up,
// and secret scanners can tell a real leaked key from noise.
const (
	KeyRandomLen   = 32
	KeyChecksumLen = 6
)

// KeyPrefixes begin API keys, by environment.
var KeyPrefixes = map[string]string{"production": "psk_live_", "staging": "psk_test_"}

// AdminPrefixes begin admin tokens: the same shape as a key,
// another prefix, so that neither is ever taken for the other.
var AdminPrefixes = map[string]string{"production": "psa_live_", "staging": "psa_test_"}

// NewKeyToken returns a fresh random key for env.
func NewKeyToken(env string) string { return NewSecret(KeyPrefixes[env]) }

// NewSecret returns a fresh random secret that begins with prefix: a key,
// or an admin token.
func NewSecret(prefix string) string {
	b := make([]byte, 0, len(prefix)+KeyRandomLen+KeyChecksumLen)
	b = appendRandomBase62(append(b, prefix...), KeyRandomLen)
	return string(AppendChecksum(b, b))
}

// AppendChecksum appends the checksum of body to dst, in base62.
func AppendChecksum(dst, body []byte) []byte {
	sum := crc32.ChecksumIEEE(body)
	var c [KeyChecksumLen]byte
	for i := KeyChecksumLen - 1; i >= 0; i-- {
		c[i] = Base62[sum%62]
		sum /= 62
	}
	return append(dst, c[:]...)
}

// IsBase62 tells the bytes of base62.
var IsBase62 = func() (table [256]bool) {
	for i := range len(Base62) {
		table[Base62[i]] = true
	}
	return table
}()

// HashKey is what the database keeps of a key or a token: its SHA-256.
func HashKey(token string) [sha256.Size]byte {
	// A key is longer than the 32 bytes Go converts a string into on the
	// stack: copy it into a larger stack buffer instead of the heap.
	var buf [64]byte
	return sha256.Sum256(append(buf[:0], token...))
}
