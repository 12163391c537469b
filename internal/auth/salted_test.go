package auth_test

import (
	"crypto/pbkdf2"
	"crypto/sha512"
	"testing"
)

// saltedPassword is Hi(password, salt, i) of RFC 5802 for SHA-512, what a
// KIP-554 client sends in an upsertion.
func saltedPassword(t *testing.T, password string, salt []byte, iters int) []byte {
	t.Helper()
	k, err := pbkdf2.Key(sha512.New, password, salt, iters, sha512.Size)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
