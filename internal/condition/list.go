package condition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/traits"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// List is a compiled list expression: a fan-out step's items
// (docs/workflows.md, "Fan-out over a list"). The same variables as a
// condition's; its value is the list whose elements the step runs once each.
type List struct {
	expr string
	prg  cel.Program
}

// String is the expression's text.
func (l *List) String() string { return l.expr }

var compiledLists sync.Map // string → listResult

type listResult struct {
	l   *List
	err error
}

// CompileList parses and type-checks expr: CEL over payload, results and
// order whose type is a list (or dyn, a field of the payload or a result,
// checked to be a list when evaluated). A field path such as
// payload.lineItems is such an expression. The error is one line.
func CompileList(expr string) (*List, error) {
	if v, ok := compiledLists.Load(expr); ok {
		r := v.(listResult)
		return r.l, r.err
	}
	l, err := compileList(expr)
	compiledLists.Store(expr, listResult{l, err})
	return l, err
}

func compileList(expr string) (*List, error) {
	prg, err := program(expr, "list expression", "a list", func(t *cel.Type) bool {
		return t.Kind() == cel.ListType(cel.DynType).Kind() || t.IsExactType(cel.DynType)
	})
	if err != nil {
		return nil, err
	}
	return &List{expr: expr, prg: prg}, nil
}

// Eval evaluates l on in: the list's elements, each as compacted JSON, in
// order; or an error saying why it could not be evaluated (a missing
// field, the cost limit passed, a value that is not a list, or a list of
// more than max elements). Deterministic, as a condition's.
func (l *List) Eval(in Input, max int) ([]json.RawMessage, error) {
	vars, err := activation(in)
	if err != nil {
		return nil, err
	}
	out, _, err := l.prg.Eval(vars)
	if err != nil {
		return nil, errors.New(oneLine(err.Error()))
	}
	lister, ok := out.(traits.Lister)
	if !ok {
		return nil, fmt.Errorf("gave %v (%s), not a list", out.Value(), out.Type())
	}
	if n, ok := lister.Size().Value().(int64); !ok || n > int64(max) {
		return nil, fmt.Errorf("gave a list of %v elements, more than %d", lister.Size().Value(), max)
	}
	// A list read from the payload or a result is the decoded JSON itself:
	// written back as it came, numbers and all.
	if native, ok := out.Value().([]any); ok {
		items := make([]json.RawMessage, len(native))
		for i, v := range native {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("element %d: %w", i, err)
			}
			items[i] = b
		}
		return items, nil
	}
	// A list the expression built (a literal, a map or filter macro):
	// through protobuf's JSON value, which every CEL value converts to.
	pv, err := out.ConvertToNative(reflect.TypeOf(&structpb.ListValue{}))
	if err != nil {
		return nil, fmt.Errorf("gave a list that is not JSON: %s", oneLine(err.Error()))
	}
	values := pv.(*structpb.ListValue).GetValues()
	items := make([]json.RawMessage, len(values))
	for i, v := range values {
		b, err := protojson.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, b); err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		items[i] = compact.Bytes()
	}
	return items, nil
}
