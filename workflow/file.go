package workflow

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// File is the declarative form: {"workflows": [...]}. An optional "$schema"
// names the schema for editors and is otherwise ignored.
type File struct {
	Schema    string     `json:"$schema,omitempty"`
	Workflows []Workflow `json:"workflows,omitempty"`
	// Deployment is the optional "deployment" section the CDK construct
	// writes (agents, their queues, limits); see Deployment.
	Deployment *Deployment `json:"deployment,omitempty"`
}

//go:embed schema.json
var schema []byte

// Schema returns the JSON Schema (draft 2020-12) of a workflow file.
// Everything it refuses, Parse refuses too; Parse also checks what a schema
// cannot say (unique names, limits shared by steps of one name).
func Schema() []byte { return bytes.Clone(schema) }

// MaxFileBytes bounds a workflow file.
const MaxFileBytes = 1 << 20

// Load reads and parses the workflow file at path.
func Load(path string) ([]Workflow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &FieldError{File: path, Reason: fmt.Sprintf("cannot read the workflow file: %v", err)}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, &FieldError{File: path, Reason: fmt.Sprintf("cannot read the workflow file: %v", err)}
	}
	return Parse(path, data)
}

// Parse reads a workflow file's bytes (file names it in errors) and
// validates the workflows it defines. Unknown fields are refused, so a
// misspelt limit is an error, not a default.
func Parse(file string, data []byte) ([]Workflow, error) {
	f, err := ParseFile(file, data)
	if err != nil {
		return nil, err
	}
	if f.Workflows == nil {
		return nil, &FieldError{File: file, Path: "workflows", Reason: "required: a list of workflows"}
	}
	return f.Workflows, nil
}

// ParseFile reads a whole workflow file: its workflows, validated as Parse
// validates them, and its deployment section, validated by
// Deployment.Validate. "workflows" may be absent only when "deployment" is
// there (Workflows is then nil).
func ParseFile(file string, data []byte) (File, error) {
	fail := func(path, format string, args ...any) (File, error) {
		return File{}, &FieldError{File: file, Path: path, Reason: fmt.Sprintf(format, args...)}
	}
	if len(data) > MaxFileBytes {
		return fail("", "over the %d-byte limit", MaxFileBytes)
	}
	var top struct {
		Schema     *json.RawMessage  `json:"$schema"`
		Workflows  []json.RawMessage `json:"workflows"`
		Deployment json.RawMessage   `json:"deployment"`
	}
	if err := strict(data, &top); err != nil {
		return fail(fieldPath("", err), "%s", reason(err))
	}
	var out File
	if len(top.Deployment) > 0 && string(top.Deployment) != "null" {
		var d Deployment
		if err := strict(top.Deployment, &d); err != nil {
			return fail(fieldPath("deployment", err), "%s", reason(err))
		}
		if err := d.Validate(file); err != nil {
			return File{}, err
		}
		out.Deployment = &d
	}
	if top.Workflows == nil {
		if out.Deployment != nil {
			return out, nil
		}
		return fail("workflows", "required: a list of workflows")
	}
	ws := make([]Workflow, len(top.Workflows))
	for i, raw := range top.Workflows {
		wp := fmt.Sprintf("workflows[%d]", i)
		var w struct {
			Name  string            `json:"name"`
			Steps []json.RawMessage `json:"steps"`
		}
		if err := strict(raw, &w); err != nil {
			return fail(fieldPath(wp, err), "%s", reason(err))
		}
		ws[i].Name = w.Name
		ws[i].Steps = make([]Step, len(w.Steps))
		for j, rs := range w.Steps {
			sp := fmt.Sprintf("%s.steps[%d]", wp, j)
			var r rawStep
			if err := strict(rs, &r); err != nil {
				var ue unknownField
				if ue.from(err) {
					// encoding/json names the field, not where it is:
					// find it, so that a misspelt retry field reads
					// "steps[0].retry.tries", not "steps[0].tries".
					return fail(sp+"."+unknownIn(rs, ue.name), "%s", reason(err))
				}
				return fail(fieldPath(sp, err), "%s", reason(err))
			}
			st, path, err := r.step(sp)
			if err != nil {
				return fail(path, "%s", err.Error())
			}
			ws[i].Steps[j] = st
		}
	}
	if err := validate(file, ws); err != nil {
		return File{}, err
	}
	out.Workflows = ws
	return out, nil
}

// strict decodes one JSON value into v, refusing unknown fields and
// trailing data.
func strict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// fieldPath is where a decode error happened below prefix.
func fieldPath(prefix string, err error) string {
	var te *json.UnmarshalTypeError
	field := ""
	switch {
	case errors.As(err, &te):
		field = te.Field
	default:
		var ue unknownField
		if ue.from(err) {
			field = ue.name
		}
	}
	switch {
	case field == "":
		return prefix
	case prefix == "":
		return field
	}
	return prefix + "." + field
}

// reason is a decode error said for a person.
func reason(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	var ue unknownField
	switch {
	case errors.As(err, &te):
		return fmt.Sprintf("must be %s, not %s", kind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON at byte %d: %v", se.Offset, se)
	case ue.from(err):
		return fmt.Sprintf("unknown field %q", ue.name)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "not valid JSON: it ends too early"
	}
	// A Duration's own message ("must be a duration string such as ...").
	return err.Error()
}

func kind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "slice":
		return "a list"
	case "struct", "map":
		return "an object"
	case "int", "int64":
		return "a whole number"
	}
	return k
}

// unknownField reads encoding/json's "unknown field" error, which has no
// type of its own.
type unknownField struct{ name string }

func (u *unknownField) from(err error) bool {
	var name string
	if _, scanErr := fmt.Sscanf(err.Error(), "json: unknown field %q", &name); scanErr != nil {
		return false
	}
	u.name = name
	return true
}

// rawStep is a step as written, its durations not yet read, so that a bad
// duration is reported at its own path.
type rawStep struct {
	Name       string          `json:"name"`
	Agent      string          `json:"agent"`
	Action     string          `json:"action"`
	Undo       string          `json:"undo"`
	Timeout    json.RawMessage `json:"timeout"`
	WaitLimit  json.RawMessage `json:"waitLimit"`
	TotalLimit json.RawMessage `json:"totalLimit"`
	When       string          `json:"when"`
	Retry      *struct {
		MaximumAttempts    int             `json:"maximumAttempts"`
		InitialInterval    json.RawMessage `json:"initialInterval"`
		BackoffCoefficient float64         `json:"backoffCoefficient"`
		MaximumInterval    json.RawMessage `json:"maximumInterval"`
		NonRetryableErrors []string        `json:"nonRetryableErrors"`
		Tries              int             `json:"tries"`
		FailureThreshold   int             `json:"failureThreshold"`
		Attempts           int             `json:"attempts"`
		Backoff            *struct {
			Base json.RawMessage `json:"base"`
			Max  json.RawMessage `json:"max"`
		} `json:"backoff"`
	} `json:"retry"`
	UndoRetry *struct {
		MaximumAttempts    int             `json:"maximumAttempts"`
		InitialInterval    json.RawMessage `json:"initialInterval"`
		BackoffCoefficient float64         `json:"backoffCoefficient"`
		MaximumInterval    json.RawMessage `json:"maximumInterval"`
		NonRetryableErrors []string        `json:"nonRetryableErrors"`
	} `json:"undoRetry"`
	After    []string `json:"after"`
	Callback *struct {
		Timeout   json.RawMessage `json:"timeout"`
		Heartbeat json.RawMessage `json:"heartbeat"`
	} `json:"callback"`
	Wait *struct {
		For   json.RawMessage `json:"for"`
		Until string          `json:"until"`
	} `json:"wait"`
	ForEach *ForEach `json:"forEach"`
}

// durField is one duration of a step, as written and where it goes.
type durField struct {
	field string
	raw   json.RawMessage
	into  *Duration
}

func (r rawStep) step(sp string) (Step, string, error) {
	s := Step{Name: r.Name, Agent: r.Agent, Action: r.Action, Undo: r.Undo, After: r.After, When: r.When, ForEach: r.ForEach}
	durations := []durField{
		{"timeout", r.Timeout, &s.Timeout},
		{"waitLimit", r.WaitLimit, &s.WaitLimit},
		{"totalLimit", r.TotalLimit, &s.TotalLimit},
	}
	if r.Retry != nil {
		s.Retry = &Retry{FailureThreshold: r.Retry.FailureThreshold, Attempts: r.Retry.Attempts,
			MaximumAttempts: r.Retry.MaximumAttempts, BackoffCoefficient: r.Retry.BackoffCoefficient,
			NonRetryableErrors: r.Retry.NonRetryableErrors, Tries: r.Retry.Tries}
		durations = append(durations,
			durField{"retry.initialInterval", r.Retry.InitialInterval, &s.Retry.InitialInterval},
			durField{"retry.maximumInterval", r.Retry.MaximumInterval, &s.Retry.MaximumInterval})
		if b := r.Retry.Backoff; b != nil {
			s.Retry.Backoff = &Backoff{}
			durations = append(durations,
				durField{"retry.backoff.base", b.Base, &s.Retry.Backoff.Base},
				durField{"retry.backoff.max", b.Max, &s.Retry.Backoff.Max})
		}
	}
	if u := r.UndoRetry; u != nil {
		s.UndoRetry = &UndoRetry{MaximumAttempts: u.MaximumAttempts, BackoffCoefficient: u.BackoffCoefficient,
			NonRetryableErrors: u.NonRetryableErrors}
		durations = append(durations,
			durField{"undoRetry.initialInterval", u.InitialInterval, &s.UndoRetry.InitialInterval},
			durField{"undoRetry.maximumInterval", u.MaximumInterval, &s.UndoRetry.MaximumInterval})
	}
	if c := r.Callback; c != nil {
		s.Callback = &Callback{}
		durations = append(durations,
			durField{"callback.timeout", c.Timeout, &s.Callback.Timeout},
			durField{"callback.heartbeat", c.Heartbeat, &s.Callback.Heartbeat})
	}
	if w := r.Wait; w != nil {
		s.Wait = &Wait{Until: w.Until}
		durations = append(durations, durField{"wait.for", w.For, &s.Wait.For})
	}
	for _, d := range durations {
		if len(d.raw) == 0 {
			continue
		}
		if err := d.into.UnmarshalJSON(d.raw); err != nil {
			return Step{}, sp + "." + d.field, err
		}
	}
	return s, "", nil
}

// stepFields are the fields a step object may have, by where they are:
// "" is the step, "retry" its retry policy, "retry.backoff" its backoff.
var stepFields = map[string][]string{
	"": {"name", "agent", "action", "undo", "timeout", "waitLimit", "totalLimit", "retry", "undoRetry", "after", "callback", "wait", "when", "forEach"},
	"retry": {"maximumAttempts", "initialInterval", "backoffCoefficient", "maximumInterval", "nonRetryableErrors", "tries",
		"failureThreshold", "attempts", "backoff"},
	"retry.backoff": {"base", "max"},
	"undoRetry":     {"maximumAttempts", "initialInterval", "backoffCoefficient", "maximumInterval", "nonRetryableErrors"},
	"callback":      {"timeout", "heartbeat"},
	"wait":          {"for", "until"},
	"forEach":       {"items", "concurrency"},
}

// unknownIn is the path, within a step, of the unknown field name: the
// first object of the step (the step, its retry, its backoff) that has a
// field of that name it does not allow. Just name when it is not found.
func unknownIn(step json.RawMessage, name string) string {
	objects := map[string]json.RawMessage{"": step}
	var top map[string]json.RawMessage
	if json.Unmarshal(step, &top) == nil {
		objects["retry"] = top["retry"]
		objects["undoRetry"] = top["undoRetry"]
		objects["callback"] = top["callback"]
		objects["wait"] = top["wait"]
		objects["forEach"] = top["forEach"]
		var retry map[string]json.RawMessage
		if json.Unmarshal(top["retry"], &retry) == nil {
			objects["retry.backoff"] = retry["backoff"]
		}
	}
	for _, where := range []string{"", "retry", "retry.backoff", "undoRetry", "callback", "wait", "forEach"} {
		var fields map[string]json.RawMessage
		if json.Unmarshal(objects[where], &fields) != nil {
			continue
		}
		if _, ok := fields[name]; ok && !slices.Contains(stepFields[where], name) {
			if where == "" {
				return name
			}
			return where + "." + name
		}
	}
	return name
}

// SchemaURL is the published schema's address, written as a file's
// "$schema" so that editors can check it.
const SchemaURL = "https://github.com/sas-go/sas/workflow/schema.json"

// Write validates the definitions and writes them as a workflow file that
// Parse reads back to the same definitions: what `sasctl workflows write`
// runs, so that a workflows.json is generated from the Go definitions
// rather than kept in step by hand.
func Write(w io.Writer, defs ...Workflow) error {
	if err := Validate(defs...); err != nil {
		return err
	}
	b, err := json.MarshalIndent(File{Schema: SchemaURL, Workflows: defs}, "", "  ")
	if err != nil {
		return fmt.Errorf("writing the workflows: %w", err)
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteFile is Write to the file at path.
func WriteFile(path string, defs ...Workflow) error {
	var buf bytes.Buffer
	if err := Write(&buf, defs...); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
