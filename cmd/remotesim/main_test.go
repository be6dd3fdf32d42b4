package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/dev/remotesim"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "faults.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"hangRate":0.2,"lostMode":"error"}`), 0o600))

	cases := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c config)
	}{
		{"defaults", nil, nil, func(t *testing.T, c config) {
			assert.Equal(t, "127.0.0.1:0", c.addr)
			assert.EqualValues(t, 1, c.sim.Seed)
			assert.Equal(t, remotesim.Faults{}, c.sim.Faults)
		}},
		{"flags", []string{"-addr", "127.0.0.1:9999", "-seed", "7", "-transient-rate", "0.1", "-transient-status", "429",
			"-retry-after", "2s", "-hang-rate", "0.05", "-latency-base", "3ms"}, nil, func(t *testing.T, c config) {
			assert.Equal(t, "127.0.0.1:9999", c.addr)
			assert.EqualValues(t, 7, c.sim.Seed)
			f := c.sim.Faults
			assert.InDelta(t, 0.1, f.TransientRate, 1e-12)
			assert.Equal(t, 429, f.TransientStatus)
			assert.Equal(t, 2*time.Second, f.RetryAfter)
			assert.InDelta(t, 0.05, f.HangRate, 1e-12)
			assert.Equal(t, 3*time.Millisecond, f.LatencyBase)
		}},
		{"env, and a flag beats its variable", []string{"-seed", "9"},
			map[string]string{"REMOTESIM_SEED": "8", "REMOTESIM_LOST_RATE": "0.3", "REMOTESIM_ADDR": "127.0.0.1:1234"},
			func(t *testing.T, c config) {
				assert.EqualValues(t, 9, c.sim.Seed)
				assert.InDelta(t, 0.3, c.sim.Faults.LostRate, 1e-12)
				assert.Equal(t, "127.0.0.1:1234", c.addr)
			}},
		{"faults file, single knobs override it", []string{"-faults", "@" + file, "-lost-mode", "hang"}, nil,
			func(t *testing.T, c config) {
				assert.InDelta(t, 0.2, c.sim.Faults.HangRate, 1e-12, "kept from the file")
				assert.Equal(t, remotesim.LostHang, c.sim.Faults.LostMode)
			}},
		{"inline faults with a script", []string{"-faults", `{"scripts":[{"orderId":"o-1","plan":[{"fault":"permanent"}]}]}`}, nil,
			func(t *testing.T, c config) {
				require.Len(t, c.sim.Faults.Scripts, 1)
				assert.Equal(t, "o-1", c.sim.Faults.Scripts[0].OrderID)
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, err := parseConfig(tc.args, env(tc.env), io.Discard)
			require.NoError(t, err)
			tc.check(t, c)
		})
	}
}

func TestParseConfigRejects(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		args []string
		env  map[string]string
	}{
		"rate out of range": {args: []string{"-hang-rate", "2"}},
		"bad env":           {env: map[string]string{"REMOTESIM_SEED": "many"}},
		"bad json":          {args: []string{"-faults", `{"hangRat":1}`}},
		"missing file":      {args: []string{"-faults", "@/nonexistent/faults.json"}},
		"stray argument":    {args: []string{"serve"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := parseConfig(tc.args, env(tc.env), io.Discard)
			assert.Error(t, err)
		})
	}
}

// TestRunServesAndShutsDown starts the command, calls it, leaves a request
// hanging, and checks that cancelling (as SIGTERM does) still stops it: the
// hang is cut rather than waited out.
func TestRunServesAndShutsDown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	urlFile := filepath.Join(t.TempDir(), "url")
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-url-file", urlFile, "-faults",
			`{"scripts":[{"key":"stuck","plan":[{"fault":"hang"}]}]}`}, env(nil), pw, io.Discard)
		_ = pw.Close()
	}()

	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	url := strings.TrimSpace(line)
	require.True(t, strings.HasPrefix(url, "http://127.0.0.1:"), url)
	fromFile, err := os.ReadFile(urlFile)
	require.NoError(t, err)
	assert.Equal(t, url, strings.TrimSpace(string(fromFile)))

	post := func(ctx context.Context, key string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/payments", strings.NewReader(`{"orderId":"o-1","amount":5}`))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", key)
		return http.DefaultClient.Do(req)
	}
	resp, err := post(context.Background(), "k")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode)

	hung := make(chan error, 1)
	go func() {
		// No deadline: the request hangs until the server lets it go.
		resp, err := post(context.Background(), "stuck")
		if err == nil {
			resp.Body.Close()
		}
		hung <- err
	}()
	require.Eventually(t, func() bool {
		resp, err := http.Get(url + "/_sim/stats")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `"hangs":1`)
	}, 5*time.Second, 5*time.Millisecond)

	// The hang lasts 10 minutes (HangFor) unless the shutdown cuts it: run
	// returns, and the request fails, only if it does. The minute below is
	// a watchdog for a broken shutdown, not a measure of a healthy one.
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("run did not stop: the hanging request held it")
	}
	assert.Error(t, <-hung, "the hanging request was cut, not answered")
}
