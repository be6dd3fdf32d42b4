package remotesim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"
)

func (s *Sim) writeTransient(w http.ResponseWriter, status int, retryAfter time.Duration, msg string) {
	w.Header().Set("Retry-After", retryAfterSeconds(retryAfter))
	typ := "unavailable"
	if status == http.StatusTooManyRequests {
		typ = "rate_limited"
	}
	writeError(w, status, typ, msg)
}

func writePermanent(w http.ResponseWriter, status int, path string) {
	typ := "invalid_request"
	switch status {
	case http.StatusPaymentRequired:
		typ = "payment_declined"
	case http.StatusUnprocessableEntity:
		typ = "unprocessable"
	case http.StatusForbidden:
		typ = "forbidden"
	case http.StatusNotFound, http.StatusGone:
		typ = "not_found"
	}
	writeError(w, status, typ, fmt.Sprintf("simulated permanent failure of %s", path))
}

// errorBody is the shape of every error answer.
type errorBody struct {
	Error struct {
		Type    string `json:"type"`
		Status  int    `json:"status"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	var b errorBody
	b.Error.Type, b.Error.Status, b.Error.Message = typ, status, msg
	writeJSON(w, status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("encoding response: %v", err), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// marshal is json.Marshal without HTML escaping, as services that are not
// web pages answer: '<' stays one byte.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// retryAfterSeconds renders Retry-After in whole seconds, rounded up so a
// client that honours it never comes back early.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10)
}
