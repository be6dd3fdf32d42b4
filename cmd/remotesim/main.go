// Command remotesim serves the remote-service simulator (internal/dev/remotesim)
// on a loopback address, for agents and black-box runs to call: POST
// /payments, /refunds or any /<resource> with an Idempotency-Key, and the
// /_sim/ admin API to read the ledger and change the faults while it runs.
//
// It prints its base URL, alone, as the first line on stdout (and to
// -url-file when given), so a script that started it on a free port can find
// it. Knobs: -faults takes the whole JSON of PUT /_sim/faults (inline, or
// @file); the single-knob flags override it. Every flag has an environment
// variable, REMOTESIM_<FLAG> in upper case with _ for -; a flag wins over its
// variable.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sas-go/sas/internal/dev/remotesim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		log.Fatalf("remotesim: %v", err)
	}
}

// config is what the command line and environment ask for.
type config struct {
	addr    string
	urlFile string
	sim     remotesim.Config
}

// parseConfig reads flags over environment variables over defaults.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("remotesim", flag.ContinueOnError)
	fs.SetOutput(stderr)

	var (
		c         config
		seed      uint64
		faultsArg string
		p         remotesim.Profile
	)
	fs.StringVar(&c.addr, "addr", "127.0.0.1:0", "listen address (port 0: a free port)")
	fs.StringVar(&c.urlFile, "url-file", "", "also write the base URL to this file once listening")
	fs.Uint64Var(&seed, "seed", 1, "seed for every random draw")
	fs.StringVar(&faultsArg, "faults", "", `all knobs as the JSON of PUT /_sim/faults, inline or "@path"`)
	fs.DurationVar(&p.LatencyBase, "latency-base", 0, "latency every call takes")
	fs.DurationVar(&p.LatencyJitter, "latency-jitter", 0, "extra latency, uniform in [0, jitter)")
	fs.Float64Var(&p.SlowRate, "slow-rate", 0, "fraction of calls that take slow-extra more")
	fs.DurationVar(&p.SlowExtra, "slow-extra", 0, "extra latency of a slow call")
	fs.Float64Var(&p.TransientRate, "transient-rate", 0, "fraction of calls answered 503/429 before the effect")
	fs.IntVar(&p.TransientStatus, "transient-status", 0, "status of a transient failure (default 503; 429, 500, 502, 504)")
	fs.DurationVar(&p.RetryAfter, "retry-after", 0, "Retry-After of a transient failure (rounded up to seconds)")
	fs.Float64Var(&p.PermanentRate, "permanent-rate", 0, "fraction of calls answered with a 4xx before the effect")
	fs.IntVar(&p.PermanentStatus, "permanent-status", 0, "status of a permanent failure (default 402; 400, 403, 404, 410, 422)")
	fs.Float64Var(&p.HangRate, "hang-rate", 0, "fraction of calls that hang before the effect")
	fs.DurationVar(&p.HangFor, "hang-for", 0, "how long a hang lasts before the connection drops (default 10m)")
	fs.Float64Var(&p.LostRate, "lost-rate", 0, "fraction of successful calls whose response is lost after the effect")
	fs.StringVar(&p.LostMode, "lost-mode", "", "how a response is lost: drop (default), error or hang")

	// Environment first, through fs.Set so that it counts as set (below),
	// and so that flags parsed afterwards override it.
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "REMOTESIM_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v := getenv(name); v != "" && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("%s=%q: %w", name, v, err)
			}
		}
	})
	if envErr != nil {
		return config{}, envErr
	}
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}

	var faults remotesim.Faults
	if faultsArg != "" {
		raw := []byte(faultsArg)
		if path, ok := strings.CutPrefix(faultsArg, "@"); ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return config{}, fmt.Errorf("reading -faults file: %w", err)
			}
			raw = b
		}
		if err := json.Unmarshal(raw, &faults); err != nil {
			return config{}, fmt.Errorf("-faults: %w", err)
		}
	}
	// A knob set by flag or environment overrides the JSON; one left alone
	// does not zero what the JSON said.
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	apply := map[string]func(){
		"latency-base":     func() { faults.LatencyBase = p.LatencyBase },
		"latency-jitter":   func() { faults.LatencyJitter = p.LatencyJitter },
		"slow-rate":        func() { faults.SlowRate = p.SlowRate },
		"slow-extra":       func() { faults.SlowExtra = p.SlowExtra },
		"transient-rate":   func() { faults.TransientRate = p.TransientRate },
		"transient-status": func() { faults.TransientStatus = p.TransientStatus },
		"retry-after":      func() { faults.RetryAfter = p.RetryAfter },
		"permanent-rate":   func() { faults.PermanentRate = p.PermanentRate },
		"permanent-status": func() { faults.PermanentStatus = p.PermanentStatus },
		"hang-rate":        func() { faults.HangRate = p.HangRate },
		"hang-for":         func() { faults.HangFor = p.HangFor },
		"lost-rate":        func() { faults.LostRate = p.LostRate },
		"lost-mode":        func() { faults.LostMode = p.LostMode },
	}
	for name, f := range apply {
		if set[name] {
			f()
		}
	}
	if err := faults.Validate(); err != nil {
		return config{}, fmt.Errorf("faults: %w", err)
	}
	c.sim = remotesim.Config{Seed: seed, Faults: faults}
	return c, nil
}

// run serves until ctx is done, then shuts down gracefully.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	sim, err := remotesim.New(c.sim)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", c.addr, err)
	}
	url := "http://" + ln.Addr().String()

	srv := &http.Server{
		Handler:           sim,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(stderr, "remotesim: ", log.LstdFlags),
	}
	// Shutdown waits for active requests; hanging ones end only when the
	// simulator lets them go.
	srv.RegisterOnShutdown(sim.Close)

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	// The file first, so that whoever reads the printed line finds it too.
	if c.urlFile != "" {
		if err := writeFileAtomic(c.urlFile, []byte(url+"\n")); err != nil {
			_ = srv.Close()
			return fmt.Errorf("writing -url-file: %w", err)
		}
	}
	if _, err := fmt.Fprintln(stdout, url); err != nil {
		_ = srv.Close()
		return fmt.Errorf("printing the URL: %w", err)
	}
	fmt.Fprintf(stderr, "remotesim: serving on %s (seed %d); admin under %s/_sim/\n", url, c.sim.Seed, url)

	select {
	case err := <-serveErr:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	fmt.Fprintln(stderr, "remotesim: stopped")
	return nil
}

// writeFileAtomic writes through a rename, so a script polling for the file
// never reads half a URL.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".remotesim-url-*")
	if err != nil {
		return fmt.Errorf("creating temp file: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", tmp.Name(), err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("renaming to %s: %w", path, err)
	}
	return nil
}
