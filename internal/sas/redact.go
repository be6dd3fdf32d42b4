package sas

import (
	"regexp"
	"strings"
)

// urlCredentials matches a URL's userinfo: the user (and password) between
// "scheme://" and "@". A password's own "@" is escaped (%40) in a URL, so
// the first "@" ends it.
var urlCredentials = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s"'<>]+@`)

// Redacted is what Redact puts in place of a URL's credentials.
const Redacted = "***"

// Redact returns s with the credentials of every URL in it replaced by
// "***" (https://user:secret@host/p → https://***@host/p). It is the one
// redaction: a base URL's credentials must reach no error, log line,
// record, alert, status or page (docs/trust.md, "Credentials in URLs").
// BoundReason applies it to every reason, so what is stored and sent is
// redacted whatever wrote it.
func Redact(s string) string {
	if !strings.Contains(s, "@") {
		return s
	}
	return urlCredentials.ReplaceAllString(s, "${1}"+Redacted+"@")
}
