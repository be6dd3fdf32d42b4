package console

import (
	"context"
	"crypto/tls"
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

// Listen opens the console's listener on loopback. An address that is not
// loopback is refused: the console acts with the operator's credentials,
// for whoever reaches it, so a remote console needs TLS (ListenTLS).
func Listen(addr string, remote bool) (net.Listener, error) {
	if remote {
		return nil, fmt.Errorf("console address %q: -remote needs TLS (-tls-cert and -tls-key): the console's secret and the operator's actions must not cross the network in clear", addr)
	}
	return listen(addr, false)
}

// ListenTLS opens the console's listener with TLS, from a certificate and
// key in PEM files. An address that is not loopback is refused unless
// remote is set.
func ListenTLS(addr, certFile, keyFile string, remote bool) (net.Listener, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("console: the TLS certificate: %w", err)
	}
	l, err := listen(addr, remote)
	if err != nil {
		return nil, err
	}
	return tlsListener{tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})}, nil
}

// tlsListener marks a listener that speaks TLS, for URL.
type tlsListener struct{ net.Listener }

func listen(addr string, remote bool) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("console address %q: %w", addr, err)
	}
	ip := net.ParseIP(host)
	if !remote && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("console address %q is not loopback: pass -remote (with TLS) to listen there (anyone who reaches it and holds its secret acts with your AWS credentials)", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	return l, nil
}

// Serve serves the console on l until ctx ends. Requests must name the
// listener's own host, one of Config.Hosts, or, from a loopback peer only,
// localhost: a page of another site that rebinds its name to 127.0.0.1 is
// refused, even for a read, and on 0.0.0.0 a remote client cannot pass
// for a local one by sending Host: localhost.
func Serve(ctx context.Context, l net.Listener, s *Server) error {
	srv := &http.Server{Handler: s.HostChecked(l.Addr()), ReadHeaderTimeout: 10 * time.Second}
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

// HostChecked is the console behind Serve's Host check, for a listener
// on addr.
func (s *Server) HostChecked(addr net.Addr) http.Handler {
	_, port, _ := net.SplitHostPort(addr.String())
	var hosts []string
	if host, _, _ := net.SplitHostPort(addr.String()); !net.ParseIP(host).IsUnspecified() {
		hosts = append(hosts, addr.String())
	}
	for _, h := range s.cfg.Hosts {
		hosts = append(hosts, strings.ToLower(h), strings.ToLower(net.JoinHostPort(h, port)))
	}
	loopback := []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(r.Host)
		ok := slices.Contains(hosts, host) || slices.Contains(loopback, host) && loopbackPeer(r.RemoteAddr)
		if !ok && !s.cfg.AnyHost {
			http.Error(w, "refused: unknown Host "+r.Host, http.StatusMisdirectedRequest)
			return
		}
		s.ServeHTTP(w, r)
	})
}

func loopbackPeer(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URL is the console's address, without its secret (Server.LoginURL adds
// it); host, when not empty, replaces the listener's (a name remote
// browsers reach a 0.0.0.0 listener by).
func URL(l net.Listener, host ...string) string {
	scheme := "http"
	if _, ok := l.(tlsListener); ok {
		scheme = "https"
	}
	addr := l.Addr().String()
	if len(host) > 0 && host[0] != "" {
		_, port, _ := net.SplitHostPort(addr)
		addr = net.JoinHostPort(host[0], port)
	}
	return scheme + "://" + addr + "/"
}

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
