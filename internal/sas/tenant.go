package sas

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sas-go/sas/internal/sizing"
)

// Tenants (docs/trust.md, "Tenants"): submitters that must not reach each
// other's orders. A tenant names the principals that submit for it (their
// SQS SenderIds' principals, as SubmitterOf reads them) and the queues they
// may name as replyTo. Its orders' ids start with its name and a colon
// (TenantPrefix), and no other submitter may use such an id: the check is
// made on the id alone, before any read, so a submitter neither takes an id
// another tenant will use nor learns which of its ids exist. A submitter
// that is no tenant's submits as before, in the ids no tenant owns.
type Tenant struct {
	// Senders are the principals (AROA…, AIDA…) that submit for it.
	Senders []string `json:"senders"`
	// ReplyTo are the queues its submitters may name as replyTo, written
	// as the deployment's allow-list is (a URL, or a prefix ending in *):
	// instead of the deployment's list, not beside it.
	ReplyTo []string `json:"replyTo,omitempty"`
}

// Tenants is the deployment's tenants by name (SAS_TENANTS).
type Tenants map[string]Tenant

// ValidTenantName reports whether name may name a tenant: 1-32 characters
// of a-z 0-9 and -, not starting with -.
func ValidTenantName(name string) bool { return sizing.ValidTenantName(name) }

// TenantPrefix is what every order id of tenant name starts with.
func TenantPrefix(name string) string { return name + sizing.TenantSeparator }

// Check rejects tenants no deployment could hold: a bad name, a tenant with
// no sender, or a sender in two tenants (whose orders would it submit?).
func (ts Tenants) Check() error {
	owner := map[string]string{}
	for _, name := range ts.Names() {
		t := ts[name]
		if !ValidTenantName(name) {
			return fmt.Errorf("tenant %q: a name is 1-32 characters of a-z 0-9 and -, not starting with -", name)
		}
		if len(t.Senders) == 0 {
			return fmt.Errorf("tenant %s: names no sender, so nobody could submit for it", name)
		}
		for _, s := range t.Senders {
			if s == "" || s != SubmitterOf(s) {
				return fmt.Errorf("tenant %s: sender %q is not a principal's unique id (AROA…, AIDA…, without a session)", name, s)
			}
			if o, ok := owner[s]; ok {
				return fmt.Errorf("tenant %s: sender %s is tenant %s's already", name, s, o)
			}
			owner[s] = name
		}
	}
	return nil
}

// Names are the tenants' names, sorted.
func (ts Tenants) Names() []string {
	names := make([]string, 0, len(ts))
	for n := range ts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Of is the tenant submitter submits for, if any.
func (ts Tenants) Of(submitter string) (name string, t Tenant, ok bool) {
	if submitter == "" {
		return "", Tenant{}, false
	}
	for n, t := range ts {
		if slices.Contains(t.Senders, submitter) {
			return n, t, true
		}
	}
	return "", Tenant{}, false
}

// CheckOrderID tells whether submitter may use order id id: a tenant's
// submitter only ids with its prefix, any other only ids with no tenant's.
// It reads the id alone, never the store.
func (ts Tenants) CheckOrderID(submitter, id string) error {
	if name, _, ok := ts.Of(submitter); ok {
		if !strings.HasPrefix(id, TenantPrefix(name)) {
			return &ValidationError{Field: "orderId", Reason: fmt.Sprintf("%q: the orders of tenant %s have ids that start with %q", id, name, TenantPrefix(name))}
		}
		return nil
	}
	for n := range ts {
		if strings.HasPrefix(id, TenantPrefix(n)) {
			return &ValidationError{Field: "orderId", Reason: fmt.Sprintf("%q: ids starting with %q are tenant %s's, and this sender is not its", id, TenantPrefix(n), n)}
		}
	}
	return nil
}
