// Package msgctx carries what a log line about a message must name, the
// message's id and its order's trace, in the context that handles the
// message, and adds them to every line logged with that context. A handler
// puts them in once, where the message is received; every line below it
// (a duplicate intake, a stale reply, a retry that lost the race, and the
// lines yet to be written) carries them without naming them
// (docs/observability.md, "Logs").
//
// Its logger also bounds every value a line carries (Logger): what a sender
// wrote reaches the logs through reasons, errors and echoed fields, and a
// 10,000-character workflow name must not make a 10 KB line
// (docs/trust.md, "unbounded words").
package msgctx

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/sas-go/sas/internal/sas"
)

// Attribute names the lines carry.
const (
	MessageIDKey = "messageId"
	TraceIDKey   = "traceId"
)

type messageKey struct{}
type traceKey struct{}

// WithMessage is ctx handling the message with SQS id id ("" leaves ctx).
func WithMessage(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, messageKey{}, id)
}

// WithTrace is ctx handling a message of the order whose trace context is
// trace (a traceparent; "" or an invalid one leaves ctx).
func WithTrace(ctx context.Context, trace string) context.Context {
	if !sas.ValidTrace(trace) {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, trace)
}

// MessageID is the id WithMessage put in ctx, or "".
func MessageID(ctx context.Context) string {
	id, _ := ctx.Value(messageKey{}).(string)
	return id
}

// Trace is the trace context WithTrace put in ctx, or "".
func Trace(ctx context.Context) string {
	t, _ := ctx.Value(traceKey{}).(string)
	return t
}

// Logger returns l with a handler that adds the context's message id and
// trace id to every line logged with a context (the ...Context methods),
// and cuts every attribute's value to sas.MaxReasonBytes (sas.BoundReason),
// those given to With included. Wrapping a logger that already has it
// returns it unchanged.
func Logger(l *slog.Logger) *slog.Logger {
	if _, ok := l.Handler().(handler); ok {
		return l
	}
	return slog.New(handler{l.Handler()})
}

type handler struct{ slog.Handler }

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	bounded := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		bounded.AddAttrs(bound(a))
		return true
	})
	r = bounded
	if ctx != nil {
		if id := MessageID(ctx); id != "" {
			r.AddAttrs(slog.String(MessageIDKey, id))
		}
		if t := Trace(ctx); t != "" {
			r.AddAttrs(slog.String(TraceIDKey, sas.TraceID(t)))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h handler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = bound(a)
	}
	return handler{h.Handler.WithAttrs(out)}
}

// bound is a with its value cut to sas.MaxReasonBytes: a string, an error,
// or any other value whose printed form is longer (then printed), in groups
// too. Numbers, times and short values are kept as they are.
func bound(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if len(v.String()) > sas.MaxReasonBytes {
			return slog.String(a.Key, sas.BoundReason(v.String()))
		}
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, m := range g {
			out[i] = bound(m)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		var s string
		if err, ok := v.Any().(error); ok {
			s = err.Error()
		} else {
			s = fmt.Sprint(v.Any())
		}
		if len(s) > sas.MaxReasonBytes {
			return slog.String(a.Key, sas.BoundReason(s))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
func (h handler) WithGroup(name string) slog.Handler { return handler{h.Handler.WithGroup(name)} }
