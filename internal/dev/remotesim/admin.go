package remotesim

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// maxAdminBody bounds a PUT/PATCH of the knobs; scripts for a large test
// still fit comfortably.
const maxAdminBody = 1 << 20

func (s *Sim) serveAdmin(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/_sim/faults":
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, http.StatusOK, s.Faults())
		case http.MethodPut, http.MethodPatch:
			s.putFaults(w, r)
		default:
			methodNotAllowed(w, "GET, PUT, PATCH")
		}
	case "/_sim/stats":
		if r.Method != http.MethodGet {
			methodNotAllowed(w, http.MethodGet)
			return
		}
		writeJSON(w, http.StatusOK, s.Stats())
	case "/_sim/ledger":
		if r.Method != http.MethodGet {
			methodNotAllowed(w, http.MethodGet)
			return
		}
		writeJSON(w, http.StatusOK, s.Ledger())
	case "/_sim/reset":
		if r.Method != http.MethodPost {
			methodNotAllowed(w, http.MethodPost)
			return
		}
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	case "/_sim/healthz":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, "GET, HEAD")
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	default:
		writeError(w, http.StatusNotFound, "not_found",
			"admin endpoints: GET|PUT|PATCH /_sim/faults, GET /_sim/stats, GET /_sim/ledger, POST /_sim/reset, GET /_sim/healthz")
	}
}

// putFaults replaces (PUT) or merges into (PATCH) the knobs. The read-modify-
// write of a PATCH is not atomic with respect to a concurrent SetFaults; two
// operators patching at once is not a case worth a lock held across I/O.
func (s *Sim) putFaults(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("body over %d bytes", tooBig.Limit))
			return
		}
		writeError(w, http.StatusBadRequest, "bad_body", fmt.Sprintf("reading body: %v", err))
		return
	}
	var f Faults
	if r.Method == http.MethodPatch {
		f = s.Faults()
	}
	if err := f.UnmarshalJSON(body); err != nil {
		writeError(w, http.StatusBadRequest, "bad_faults", err.Error())
		return
	}
	if err := s.SetFaults(f); err != nil {
		writeError(w, http.StatusBadRequest, "bad_faults", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, s.Faults())
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "allowed: "+allow)
}
