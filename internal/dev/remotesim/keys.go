package remotesim

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

const maxKeyLen = 255

// idempotencyKey reads the header, bare (Stripe) or as a quoted
// structured-field string (the IETF draft).
func idempotencyKey(h http.Header) (string, error) {
	vals := h.Values("Idempotency-Key")
	if len(vals) == 0 {
		return "", errors.New("an Idempotency-Key header is required")
	}
	if len(vals) > 1 {
		return "", errors.New("exactly one Idempotency-Key header, please")
	}
	k := strings.TrimSpace(vals[0])
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
	}
	if k == "" || len(k) > maxKeyLen {
		return "", fmt.Errorf("the Idempotency-Key must be 1 to %d characters", maxKeyLen)
	}
	for _, c := range []byte(k) {
		if c < 0x21 || c > 0x7e {
			return "", errors.New("the Idempotency-Key must be printable ASCII without spaces")
		}
	}
	return k, nil
}

func idPrefix(resource, singular string) string {
	switch resource {
	case "payments":
		return "pay"
	case "refunds":
		return "re"
	}
	return singular
}

func statusFor(resource string) string {
	switch resource {
	case "payments":
		return "captured"
	case "refunds":
		return "refunded"
	}
	return "created"
}
