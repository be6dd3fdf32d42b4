package sasctl

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/sas-go/sas/workflow"
)

// Workflows runs `sasctl workflows validate FILE...` and `sasctl workflows
// write [-o FILE] PACKAGE FUNC`: the commands that keep a workflows.json in
// step with the Go definitions it mirrors. Neither needs a deployment.
func Workflows(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("workflows: want validate or write: %w", ErrUsage)
	}
	switch args[0] {
	case "validate":
		return validateFiles(args[1:], out)
	case "write":
		return writeFromGo(ctx, args[1:], out)
	}
	return fmt.Errorf("workflows %s: want validate or write: %w", args[0], ErrUsage)
}

// validateFiles checks each file against the published schema
// (workflow/schema.json) and then as the functions read it at start-up
// (workflow.ParseFile: unique names, limits, the deployment section), one
// line per problem.
func validateFiles(files []string, out io.Writer) error {
	if len(files) == 0 {
		return fmt.Errorf("workflows validate needs a file: %w", ErrUsage)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(workflow.Schema()))
	if err != nil {
		return fmt.Errorf("the workflow schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		return err
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		return fmt.Errorf("the workflow schema: %w", err)
	}
	var errs []error
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: not valid JSON: %v", f, err))
			continue
		}
		if err := sch.Validate(v); err != nil {
			var ve *jsonschema.ValidationError
			if errors.As(err, &ve) {
				for _, leaf := range leaves(ve) {
					errs = append(errs, fmt.Errorf("%s: %s: %s (schema)", f, "/"+strings.Join(leaf.InstanceLocation, "/"), leaf.ErrorKind.LocalizedString(english)))
				}
			} else {
				errs = append(errs, fmt.Errorf("%s: %v", f, err))
			}
			continue
		}
		parsed, err := workflow.ParseFile(f, data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(out, "%s: ok, %d workflow(s)\n", f, len(parsed.Workflows))
	}
	return errors.Join(errs...)
}

// leaves are the innermost causes of a schema error: where it is and what.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

var english = message.NewPrinter(language.English)

var goIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// writeFromGo writes the workflow file of a Go function returning
// []workflow.Workflow in the module of the working directory: it builds and
// runs a throwaway program there (go run), which calls the function,
// validates the definitions and writes them with workflow.Write.
func writeFromGo(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("workflows write", flag.ContinueOnError)
	fs.SetOutput(out)
	file := fs.String("o", "workflows.json", "the file to write")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%v: %w", err, ErrUsage)
	}
	if fs.NArg() != 2 || !goIdent.MatchString(fs.Arg(1)) {
		return fmt.Errorf("workflows write [-o FILE] PACKAGE FUNC, e.g. `sasctl workflows write example.com/greet Workflows`, run in that module: %w", ErrUsage)
	}
	pkg, fn := fs.Arg(0), fs.Arg(1)
	dir, err := os.MkdirTemp(".", ".sasctl-workflows-")
	if err != nil {
		return fmt.Errorf("workflows write: %w", err)
	}
	defer os.RemoveAll(dir)
	abs, err := filepath.Abs(*file)
	if err != nil {
		return err
	}
	src := fmt.Sprintf(`package main

import (
	"log"

	defs %q
	"github.com/sas-go/sas/workflow"
)

func main() {
	if err := workflow.WriteFile(%q, defs.%s()...); err != nil {
		log.Fatal(err)
	}
}
`, pkg, abs, fn)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "run", "./"+filepath.Base(dir))
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("workflows write: running %s.%s in this module: %w", pkg, fn, err)
	}
	fmt.Fprintf(out, "wrote %s from %s.%s\n", *file, pkg, fn)
	return nil
}
