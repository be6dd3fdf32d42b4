package sas

import (
	"crypto/rand"
	"encoding/hex"
)

// RandomID is n random bytes in hex: an instance's lease owner name, a
// local run's name, a message id. Unique enough that two processes never
// share one (16 bytes for a name that fences writes).
func RandomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}
