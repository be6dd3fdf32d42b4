// Package condition compiles and evaluates the conditions of workflow steps
// (docs/workflows.md, "Choices"): Common Expression Language (cel-go, the
// language of Kubernetes' admission policies), type-checked when a
// definition loads, evaluated deterministically under a cost limit when the
// step before completes. The reason for CEL is in docs/decisions.md.
package condition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// Limits on a condition.
const (
	// MaxLength bounds a condition's text, in bytes.
	MaxLength = 1024
	// MaxCost bounds one evaluation, in CEL's cost units (about one per
	// operation and per element a macro visits): a condition past it fails
	// its step. Enough for any test of a few fields; not for a nested loop
	// over a long list.
	MaxCost = 100_000
)

// The variables a condition sees.
const (
	// VarPayload is the order's payload, as JSON: an object's fields are
	// read as payload.field or payload["field"].
	VarPayload = "payload"
	// VarResults maps the name of each earlier step that returned a result
	// to that result, as JSON. A step that returned nothing, or was skipped,
	// has no entry: test with has(results.step) or "step" in results.
	VarResults = "results"
	// VarOrder holds the order's id and workflow: order.id, order.workflow.
	VarOrder = "order"
)

// Input is what one evaluation sees.
type Input struct {
	Payload  json.RawMessage            // the order's payload; nil reads as {}
	Results  map[string]json.RawMessage // by step name
	OrderID  string
	Workflow string
}

var env = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(VarPayload, cel.DynType),
		cel.Variable(VarResults, cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable(VarOrder, cel.MapType(cel.StringType, cel.StringType)),
		cel.CrossTypeNumericComparisons(true), // payload.amount > 100 whether amount is written 150 or 150.0
	)
})

// Condition is a compiled condition, safe for concurrent use.
type Condition struct {
	expr string
	prg  cel.Program
}

// String is the condition's text.
func (c *Condition) String() string { return c.expr }

// compiled caches Compile by text: a definition's conditions are compiled
// once per process, whoever asks.
var compiled sync.Map // string → compileResult

type compileResult struct {
	c   *Condition
	err error
}

// Compile parses and type-checks expr: it must be CEL over payload,
// results and order whose type is bool (or dyn, a field of the payload or
// a result, checked to be a bool when evaluated). The error is one line.
func Compile(expr string) (*Condition, error) {
	if v, ok := compiled.Load(expr); ok {
		r := v.(compileResult)
		return r.c, r.err
	}
	c, err := compile(expr)
	compiled.Store(expr, compileResult{c, err})
	return c, err
}

func compile(expr string) (*Condition, error) {
	prg, err := program(expr, "condition", "bool", func(t *cel.Type) bool {
		return t.IsExactType(cel.BoolType) || t.IsExactType(cel.DynType)
	})
	if err != nil {
		return nil, err
	}
	return &Condition{expr: expr, prg: prg}, nil
}

// program parses and type-checks expr, an expression of the kind what
// (named in its errors: "condition", "time expression"), whose type must
// pass typed (else it "is of type T, not " + want), and plans it under the
// cost limit. Every kind of expression compiles through it.
func program(expr, what, want string, typed func(*cel.Type) bool) (cel.Program, error) {
	switch {
	case strings.TrimSpace(expr) == "":
		return nil, fmt.Errorf("the %s is empty", what)
	case len(expr) > MaxLength:
		return nil, fmt.Errorf("the %s has %d bytes, more than %d", what, len(expr), MaxLength)
	}
	e, err := env()
	if err != nil {
		return nil, fmt.Errorf("building the expression environment: %w", err)
	}
	ast, iss := e.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("does not compile: %s", oneLine(iss.Err().Error()))
	}
	if t := ast.OutputType(); !typed(t) {
		return nil, fmt.Errorf("is of type %s, not %s", t, want)
	}
	prg, err := e.Program(ast, cel.CostLimit(MaxCost))
	if err != nil {
		return nil, fmt.Errorf("cannot be planned: %s", oneLine(err.Error()))
	}
	return prg, nil
}

// oneLine folds CEL's multi-line messages (the expression, a caret) into
// one line.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.Trim(l, "^.|") == "" || strings.HasPrefix(l, "| ") {
			continue
		}
		parts = append(parts, l)
	}
	return strings.Join(parts, "; ")
}

// Eval evaluates c on in: true or false, or an error saying why it could
// not be evaluated (a payload or result that is not JSON, a missing field,
// the cost limit passed, a value that is not a bool). The same input always
// gives the same answer: CEL has no clock, no randomness and no I/O.
func (c *Condition) Eval(in Input) (bool, error) {
	vars, err := activation(in)
	if err != nil {
		return false, err
	}
	out, _, err := c.prg.Eval(vars)
	if err != nil {
		return false, errors.New(oneLine(err.Error()))
	}
	b, ok := out.(types.Bool)
	if !ok {
		return false, fmt.Errorf("gave %v (%s), not a bool", out.Value(), out.Type())
	}
	return bool(b), nil
}

// activation is what an expression sees of in: payload, results, order.
func activation(in Input) (map[string]any, error) {
	payload, err := decode(in.Payload)
	if err != nil {
		return nil, fmt.Errorf("the payload is not JSON: %w", err)
	}
	if payload == nil {
		payload = map[string]any{}
	}
	results := make(map[string]any, len(in.Results))
	for name, raw := range in.Results {
		v, err := decode(raw)
		if err != nil {
			return nil, fmt.Errorf("the result of step %s is not JSON: %w", name, err)
		}
		results[name] = v
	}
	return map[string]any{
		VarPayload: payload,
		VarResults: results,
		VarOrder:   map[string]string{"id": in.OrderID, "workflow": in.Workflow},
	}, nil
}

// decode reads JSON with its numbers as CEL's: an integer that fits is an
// int, any other number a double.
func decode(raw json.RawMessage) (any, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return numbers(v), nil
}

func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}
