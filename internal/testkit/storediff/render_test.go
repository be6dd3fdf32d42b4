package storediff

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/sas"
)

// render writes what a store answered as lines of "path: value", every
// field by reflection (so a field added to a record is compared without
// touching this test), times as UTC instants, errors by the sentinel they
// carry. Two stores agree when their renderings are equal.
func render(v any, err error) []string {
	var out []string
	if v != nil && err == nil {
		flatten("", reflect.ValueOf(v), &out)
	}
	return append(out, renderErr(err)...)
}

func renderErr(err error) []string {
	var re *sas.RaceError
	var ve *sas.ValidationError
	switch {
	case err == nil:
		return []string{"error: none"}
	case errors.As(err, &re):
		out := []string{fmt.Sprintf("error: lost race on %s", re.Key)}
		if re.Current == nil {
			return append(out, "current: none")
		}
		flatten("current", reflect.ValueOf(*re.Current), &out)
		return out
	case errors.Is(err, sas.ErrLostRace):
		return []string{"error: lost race (no RaceError)"}
	case errors.As(err, &ve):
		return []string{"error: invalid " + ve.Field}
	case errors.Is(err, sas.ErrInvalid):
		return []string{"error: invalid (no ValidationError)"}
	case errors.Is(err, sas.ErrNotFound):
		return []string{"error: not found"}
	case errors.Is(err, sas.ErrOrderConflict):
		return []string{"error: order conflict"}
	}
	return []string{"error: unexpected: " + err.Error()}
}

var timeType = reflect.TypeOf(time.Time{})

func flatten(path string, v reflect.Value, out *[]string) {
	line := func(s string) { *out = append(*out, path+": "+s) }
	if v.Type() == timeType {
		t := v.Interface().(time.Time)
		if t.IsZero() {
			line("zero")
		} else {
			line(t.UTC().Format(time.RFC3339Nano))
		}
		return
	}
	if _, ok := v.Interface().(json.RawMessage); ok {
		line(fmt.Sprintf("%q", v.Bytes()))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			line("nil")
			return
		}
		flatten(path, v.Elem(), out)
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() {
				flatten(join(path, f.Name), v.Field(i), out)
			}
		}
	case reflect.Slice:
		line(fmt.Sprintf("%d items", v.Len()))
		for i := 0; i < v.Len(); i++ {
			flatten(fmt.Sprintf("%s[%d]", path, i), v.Index(i), out)
		}
	default:
		line(fmt.Sprintf("%v", v.Interface()))
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// diff lists the fields where two renderings differ, by path, each side's
// value ("absent" when it has no such field).
func diff(a, b []string) string {
	split := func(lines []string) (map[string]string, []string) {
		m, order := map[string]string{}, []string(nil)
		for _, l := range lines {
			path, v, _ := strings.Cut(l, ": ")
			if _, dup := m[path]; !dup {
				order = append(order, path)
			}
			m[path] = v
		}
		return m, order
	}
	am, order := split(a)
	bm, border := split(b)
	for _, p := range border {
		if _, ok := am[p]; !ok {
			order = append(order, p)
		}
	}
	var out strings.Builder
	shown := 0
	for _, p := range order {
		av, aok := am[p]
		bv, bok := bm[p]
		if aok && bok && av == bv {
			continue
		}
		if !aok {
			av = "absent"
		}
		if !bok {
			bv = "absent"
		}
		if shown++; shown > 30 {
			out.WriteString("\n    ...")
			break
		}
		fmt.Fprintf(&out, "\n    %s: memory %s | dynamodb %s", p, av, bv)
	}
	return out.String()
}
