package console

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/sas"
)

// DefaultAddr is where the console listens unless told otherwise: loopback.
const DefaultAddr = "127.0.0.1:8089"

// Listen opens the console's listener. An address that is not loopback is
// refused unless remote is set: the console acts with the operator's
// credentials, for whoever reaches it.
func Listen(addr string, remote bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("console address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if !remote && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("console address %q is not loopback: pass -remote to listen there (anyone who reaches it acts with your AWS credentials)", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	return l, nil
}

// Serve serves the console on l until ctx ends. Requests must name the
// listener's own host (or localhost) in Host: a page of another site that
// rebinds its name to 127.0.0.1 is refused, even for a read.
func Serve(ctx context.Context, l net.Listener, s *Server) error {
	_, port, _ := net.SplitHostPort(l.Addr().String())
	hosts := []string{l.Addr().String(), "localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !slices.Contains(hosts, strings.ToLower(r.Host)) && !s.cfg.AnyHost {
				http.Error(w, "refused: unknown Host "+r.Host, http.StatusMisdirectedRequest)
				return
			}
			s.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("console: %w", err)
	}
	return nil
}

// URL is the address to open in a browser.
func URL(l net.Listener) string { return "http://" + l.Addr().String() + "/" }

// QueueRefsOf names the deployment's queues from its configuration; the
// shared agent queue (SAS_AGENT_QUEUE_URL) feeds every agent of reg
// without a queue of its own.
func QueueRefsOf(cfg config.Config, reg sas.Registry) []QueueRef {
	var out []QueueRef
	add := func(name string, agents []string, url string) {
		if url == "" {
			return
		}
		for _, q := range out {
			if q.URL == url {
				return
			}
		}
		out = append(out, QueueRef{Name: name, Agents: agents, URL: url})
	}
	add("intake", nil, cfg.IntakeQueueURL)
	add("scheduler", nil, cfg.SchedulerQueueURL)
	add("control", nil, cfg.ControlQueueURL)
	for _, a := range sortedKeys(cfg.AgentQueues.ByAgent) {
		q := cfg.AgentQueues.ByAgent[a]
		add("agent "+a, []string{a}, q.URL)
		add("agent "+a+" (priority)", []string{a}, q.PriorityURL)
	}
	var shared []string
	for _, a := range AgentsOf(reg, config.Config{}) {
		if _, own := cfg.AgentQueues.ByAgent[a]; !own {
			shared = append(shared, a)
		}
	}
	add("agents "+strings.Join(shared, ", "), shared, cfg.AgentQueues.Default)
	return out
}

// AgentsOf names the agents of the workflows and the configured queues.
func AgentsOf(reg sas.Registry, cfg config.Config) []string {
	var out []string
	for _, as := range reg.StepAgents() {
		for _, a := range as {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	for a := range cfg.AgentQueues.ByAgent {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.Sort(out)
	return out
}
