package condition

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// Time is a compiled time expression: a wait step's until
// (docs/workflows.md, "Wait steps"). The same variables as a condition's;
// its value is the time to wait until.
type Time struct {
	expr string
	prg  cel.Program
}

// String is the expression's text.
func (t *Time) String() string { return t.expr }

var compiledTimes sync.Map // string → timeResult

type timeResult struct {
	t   *Time
	err error
}

// CompileTime parses and type-checks expr: CEL over payload, results and
// order whose type is a string (RFC 3339), a timestamp, a number (seconds
// since the Unix epoch) or dyn (a field of the payload or a result, checked
// when evaluated). A field path such as payload.remindAt is such an
// expression. The error is one line.
func CompileTime(expr string) (*Time, error) {
	if v, ok := compiledTimes.Load(expr); ok {
		r := v.(timeResult)
		return r.t, r.err
	}
	t, err := compileTime(expr)
	compiledTimes.Store(expr, timeResult{t, err})
	return t, err
}

func compileTime(expr string) (*Time, error) {
	prg, err := program(expr, "time expression", "a time (a string in RFC 3339, a timestamp or seconds since the epoch)", func(t *cel.Type) bool {
		for _, want := range []*cel.Type{cel.StringType, cel.TimestampType, cel.IntType, cel.DoubleType, cel.DynType} {
			if t.IsExactType(want) {
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	return &Time{expr: expr, prg: prg}, nil
}

// Eval evaluates t on in: the time it names, or an error saying why it
// could not be evaluated (a missing field, the cost limit passed, a value
// that is not a time). Deterministic, as a condition's.
func (t *Time) Eval(in Input) (time.Time, error) {
	vars, err := activation(in)
	if err != nil {
		return time.Time{}, err
	}
	out, _, err := t.prg.Eval(vars)
	if err != nil {
		return time.Time{}, errors.New(oneLine(err.Error()))
	}
	switch v := out.(type) {
	case types.Timestamp:
		return v.Time.UTC(), nil
	case types.String:
		at, err := time.Parse(time.RFC3339Nano, string(v))
		if err != nil {
			return time.Time{}, fmt.Errorf("gave %q, not a time in RFC 3339", string(v))
		}
		return at.UTC(), nil
	case types.Int:
		return time.Unix(int64(v), 0).UTC(), nil
	case types.Double:
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) > 1e11 {
			return time.Time{}, fmt.Errorf("gave %v, not seconds since the epoch", f)
		}
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9)).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("gave %v (%s), not a time", out.Value(), out.Type())
}
