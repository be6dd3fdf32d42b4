package memstore

import (
	"context"
	"testing"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/storetest"
)

func TestContract(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		storetest.Run(t, storetest.Harness{New: func(t *testing.T) storetest.Fixture {
			s := New(Config{Shards: 8})
			return storetest.Fixture{Store: s, Shards: 8, Load: func(_ context.Context, recs []sas.StepRecord) error {
				s.mu.Lock()
				defer s.mu.Unlock()
				for _, r := range recs {
					r = s.normalize(r)
					s.steps[r.Key()] = r
					s.byID[r.OrderID] = append(s.byID[r.OrderID], r.Key())
				}
				return nil
			}}
		}})
	})
}
