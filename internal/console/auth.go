package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// The console's per-launch secret (docs/console.md, "Who may use it"), as
// Jupyter's: the URL the console prints carries it (?token=…); the first
// request with it gets it back as a cookie (HttpOnly, SameSite=Strict) and
// is sent on to the same page without it, so that it leaves the address
// bar and the history. Every other request needs the cookie, or the secret
// in an Authorization header (Bearer) for scripts; without either it gets
// 401 and nothing else. The CSRF checks on state changes apply on top.

// tokenCookie is the cookie the secret travels in.
const tokenCookie = "sas-console"

// newAccessToken is a fresh secret: 32 random bytes, hex.
func newAccessToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("console: the access token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// AccessToken is the console's secret: give it only to whoever may act
// with the operator's credentials.
func (s *Server) AccessToken() string { return s.cfg.AccessToken }

// LoginURL is base (the console's URL, from URL) with the secret: the
// address to open in a browser.
func (s *Server) LoginURL(base string) string {
	return strings.TrimSuffix(base, "/") + "/?token=" + url.QueryEscape(s.cfg.AccessToken)
}

func (s *Server) secretIs(v string) bool {
	return v != "" && subtle.ConstantTimeCompare([]byte(v), []byte(s.cfg.AccessToken)) == 1
}

// authenticate lets a request through when it carries the secret. A GET
// with ?token= is answered with the cookie and a redirect to the same URL
// without the token; it reports false then, the response written.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) bool {
	if c, err := r.Cookie(tokenCookie); err == nil && s.secretIs(c.Value) {
		return true
	}
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && s.secretIs(v) {
		return true
	}
	if q := r.URL.Query(); (r.Method == http.MethodGet || r.Method == http.MethodHead) && s.secretIs(q.Get("token")) {
		http.SetCookie(w, &http.Cookie{
			Name: tokenCookie, Value: s.cfg.AccessToken, Path: "/",
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		})
		q.Del("token")
		u := *r.URL
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return false
	}
	s.cfg.Logger.Warn("console: refused a request without the console's secret", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	fmt.Fprintln(w, "refused: no console token. Open the URL the console printed when it started (it carries ?token=…).")
	return false
}
