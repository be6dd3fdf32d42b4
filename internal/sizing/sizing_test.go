package sizing_test

import (
	"testing"
	"time"

	"github.com/sas-go/sas/internal/sizing"
)

func TestAgentTimeout(t *testing.T) {
	t.Parallel()
	for longest, want := range map[time.Duration]time.Duration{
		0:                       15 * time.Second,
		30 * time.Second:        45 * time.Second,
		1500 * time.Millisecond: 17 * time.Second, // rounded up to whole seconds
		time.Hour:               sizing.MaxFunctionTimeout,
	} {
		if got := sizing.AgentTimeout(longest); got != want {
			t.Errorf("AgentTimeout(%s) = %s, want %s", longest, got, want)
		}
	}
}

func TestVisibility(t *testing.T) {
	t.Parallel()
	if sizing.SchedulerVisibility != sizing.LambdaVisibility(sizing.SchedulerTimeout) || sizing.SchedulerVisibility != 3*time.Minute {
		t.Errorf("SchedulerVisibility = %s, want 3m, LambdaVisibility(SchedulerTimeout)", sizing.SchedulerVisibility)
	}
	if got := sizing.LambdaVisibility(sizing.AgentTimeout(30 * time.Second)); got != 270*time.Second {
		t.Errorf("an agent of 30s steps: %s, want 4m30s", got)
	}
}
