package supervisor

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
)

// emfDoc is the part of an EMF line the test checks.
type emfDoc struct {
	AWS struct {
		Timestamp         int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
}

func TestMetricsAreEmbeddedMetricFormat(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var out bytes.Buffer
	s := e.supervisor(t, func(c *Config) { c.Metrics = &out })
	e.submitClaimed(t, "o-old", 1)
	e.clock.Set(T0.Add(10 * time.Second))
	e.submitClaimed(t, "o-new", 1)
	now := T0.Add(stepTimeout + time.Minute)
	e.clock.Set(now)
	rep := runOnce(t, s)
	require.Equal(t, time.Minute, rep.OldestStuckAge, "now minus the oldest deadline (o-old's, at T0+30s)")

	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, lines, 1, "one line per run")
	var doc emfDoc
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &doc))
	require.Equal(t, now.UnixMilli(), doc.AWS.Timestamp)
	require.Len(t, doc.AWS.CloudWatchMetrics, 1)
	d := doc.AWS.CloudWatchMetrics[0]
	require.Equal(t, "SAS", d.Namespace)
	require.Equal(t, [][]string{{}}, d.Dimensions, "no dimensions: what the stuck-step alarm reads")
	var root map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &root))
	want := map[string]float64{"OldestStuckStepAgeSeconds": 60, "Rescues": 2, "Waits": 0, "GiveUps": 0, "LostRaces": 0, "Held": 0, "OwedEffects": 0, "OwedOldestAgeSeconds": 0}
	var names []string
	for _, m := range d.Metrics {
		names = append(names, m.Name)
		require.Contains(t, want, m.Name)
		require.Equal(t, want[m.Name], root[m.Name], "%s is a number on the root node", m.Name)
		require.Contains(t, []string{"Seconds", "Count"}, m.Unit)
	}
	require.ElementsMatch(t, []string{"OldestStuckStepAgeSeconds", "Rescues", "Waits", "GiveUps", "LostRaces", "Held", "OwedEffects", "OwedOldestAgeSeconds"}, names)
	require.Equal(t, "sup-test", root["actor"])

	// Nothing due: zeros are published, so an alarm sees "nothing stuck".
	out.Reset()
	rep = runOnce(t, s)
	require.Zero(t, rep.OldestStuckAge)
	require.NoError(t, json.Unmarshal(out.Bytes(), &root))
	require.Equal(t, float64(0), root["OldestStuckStepAgeSeconds"])
	require.Equal(t, float64(0), root["Rescues"])
}

func TestReportIsLoggedAsOneLine(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.supervisor(t)
	e.submitClaimed(t, "o-log", 1)
	e.clock.Set(T0.Add(stepTimeout + 90*time.Second))
	runOnce(t, s)
	var sweep map[string]any
	for _, l := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		if m["msg"] == "supervisor sweep" {
			require.Nil(t, sweep, "one report line per run")
			sweep = m
		}
	}
	require.NotNil(t, sweep)
	require.Equal(t, "INFO", sweep["level"])
	require.Equal(t, float64(1), sweep["rescued"])
	require.Equal(t, float64(90), sweep["oldestStuckAgeSeconds"])
	require.Equal(t, "drained", sweep["stopped"])
	require.Equal(t, map[string]any{"due": float64(1), "waited": float64(0), "rescued": float64(1), "gaveUp": float64(0), "lostRaces": float64(0), "errors": float64(0)}, sweep["Processing"])
}

func TestReportJSON(t *testing.T) {
	t.Parallel()
	r := Report{Actor: "a", Started: T0, Elapsed: 1500 * time.Millisecond, Stopped: StopBudget, Rescued: 2,
		OldestStuckAge: 90 * time.Second, ByState: map[sas.ProcessState]StateCounts{sas.Processing: {Due: 2, Rescued: 2}}}
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.Equal(t, 1.5, m["elapsedSeconds"])
	require.Equal(t, float64(90), m["oldestStuckAgeSeconds"])
	require.Equal(t, "budget", m["stopped"])
	require.Equal(t, float64(2), m["byState"].(map[string]any)["Processing"].(map[string]any)["rescued"])
	require.NotContains(t, m, "Elapsed")
}

func TestHandlerRunsASweepOnTheSchedule(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/scheduled-event.json")
	require.NoError(t, err)
	var ev events.CloudWatchEvent
	require.NoError(t, json.Unmarshal(raw, &ev))
	require.Equal(t, "Scheduled Event", ev.DetailType)

	e := newEnv(t)
	e.submitClaimed(t, "o-h", 1)
	e.clock.Set(T0.Add(stepTimeout))
	h := NewHandler(e.supervisor(t))
	rep, err := h.Handle(t.Context(), ev)
	require.NoError(t, err)
	require.Equal(t, 1, rep.Rescued)
	require.Contains(t, e.logs.String(), ev.ID, "the invocation's event id is logged")
}
