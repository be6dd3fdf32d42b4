package sascdk

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	"github.com/sas-go/sas/internal/sizing"
)

// Tenant is a group of submitters that must not reach other submitters'
// orders (docs/trust.md, "Tenants"): its orders' ids start with its Name and
// a colon (acme:o-1), which no other sender may use, and its submitters
// name only its own queues as replyTo. The scheduler tells a tenant's
// intake by the principal SQS reports as its sender.
type Tenant struct {
	// Name is 1-32 characters of a-z 0-9 and -, not starting with -.
	Name string
	// Roles submit for it: the intake queue's own policy lets each send,
	// and the scheduler knows each by its unique id.
	Roles []awsiam.Role
	// SenderIDs are other principals that submit for it, by unique id
	// (AROA…, AIDA…: `aws iam get-role --query Role.RoleId`), for roles
	// made outside this stack; the deployer grants them the intake queue.
	SenderIDs []string
	// ReplyQueueARNs are the queues its submitters may name as replyTo,
	// instead of AllowedReplyQueueARNs (a trailing * is a name prefix).
	// No other submitter may name them. The scheduler may send to them.
	ReplyQueueARNs []string
}

// senderID is a principal's unique id as SQS reports it without a session:
// upper-case letters and digits.
var senderID = regexp.MustCompile(`^[A-Z0-9]{8,128}$`)

// validateTenants checks the tenants against each other.
func (p Props) validateTenants() []error {
	var errs []error
	names, senders := map[string]bool{}, map[string]string{}
	for i, t := range p.Tenants {
		bad := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("tenant %d (%q): %s", i, t.Name, fmt.Sprintf(format, a...)))
		}
		if !sizing.ValidTenantName(t.Name) {
			bad("a name is 1-32 characters of a-z 0-9 and -, not starting with -")
		}
		if names[t.Name] {
			bad("named twice")
		}
		names[t.Name] = true
		if len(t.Roles)+len(t.SenderIDs) == 0 {
			bad("no role and no sender id: nobody could submit for it")
		}
		for _, r := range t.Roles {
			path := *r.Node().Path()
			if o, ok := senders[path]; ok {
				bad("role %s is tenant %s's already", path, o)
			}
			senders[path] = t.Name
		}
		for _, id := range t.SenderIDs {
			if !senderID.MatchString(id) {
				bad("sender id %q: want a principal's unique id (AROA…, AIDA…), without a session name", id)
			}
			if o, ok := senders[id]; ok {
				bad("sender id %s is tenant %s's already", id, o)
			}
			senders[id] = t.Name
		}
		for _, arn := range t.ReplyQueueARNs {
			if _, err := replyQueueURL(arn); err != nil {
				bad("%v", err)
			}
		}
	}
	return errs
}

// tenantsEnv is SAS_TENANTS: each tenant's senders (its roles' unique ids
// and its sender ids) and replyTo queues, as URLs.
func (s *SAS) tenantsEnv() map[string]string {
	if len(s.p.Tenants) == 0 {
		return nil
	}
	m := map[string]any{}
	for _, t := range s.p.Tenants {
		senders := []*string{}
		for _, r := range t.Roles {
			senders = append(senders, r.RoleId())
		}
		senders = append(senders, *jsii.Strings(t.SenderIDs...)...)
		replyTo := []string{}
		for _, arn := range t.ReplyQueueARNs {
			u, _ := replyQueueURL(arn) // checked by Validate
			replyTo = append(replyTo, u)
		}
		m[t.Name] = map[string]any{"senders": senders, "replyTo": replyTo}
	}
	return map[string]string{"SAS_TENANTS": *awscdk.Stack_Of(s).ToJsonString(m, nil)}
}

// tenantReplyQueueARNs are every tenant's replyTo queues, which the
// scheduler may send statuses to.
func (s *SAS) tenantReplyQueueARNs() []string {
	var out []string
	for _, t := range s.p.Tenants {
		for _, arn := range t.ReplyQueueARNs {
			if !slices.Contains(out, arn) {
				out = append(out, arn)
			}
		}
	}
	return out
}

// tenantRoleARNs are the tenants' roles, which the intake queue's policy
// lets send.
func (s *SAS) tenantRoleARNs() []*string {
	var out []*string
	for _, t := range s.p.Tenants {
		for _, r := range t.Roles {
			out = append(out, r.RoleArn())
		}
	}
	return out
}
