package scheduler

import (
	"context"
	"errors"
	"fmt"

	"github.com/sas-go/sas/internal/sas"
)

// Workflow versions (docs/workflows.md, "Versions"): a new order runs on
// the registered definition and carries its version; an order keeps that
// version to its end, so one submitted before a deploy changed its workflow
// runs on the definition stored when it was submitted.

// workflow returns the definition an order of the named workflow and
// version runs on: the registered one when the version is its own (or ""
// for an order from before versions), else the stored one. An order no
// definition can be found for is a DropError: retrying cannot find one.
func (s *Service) workflow(ctx context.Context, name, version string) (sas.Workflow, error) {
	w, stored, err := s.defs.Get(ctx, name, version)
	if errors.Is(err, sas.ErrNotFound) {
		return sas.Workflow{}, drop(err, "workflow %q version %q is neither registered nor stored", name, version)
	}
	if err != nil {
		return sas.Workflow{}, err
	}
	if stored {
		s.log.DebugContext(ctx, "running an earlier workflow version", "workflow", name, "version", version, "registered", s.defs.Registered(name))
	}
	return w, nil
}

// storeDefinition makes sure w's definition is in the store before the
// first order of its version is submitted, once per process.
func (s *Service) storeDefinition(ctx context.Context, w sas.Workflow) error {
	key := w.Name + "#" + s.defs.Registered(w.Name)
	if _, done := s.stored.Load(key); done {
		return nil
	}
	if err := s.cfg.Store.PutDefinition(ctx, w); err != nil {
		return fmt.Errorf("storing the definition of workflow %s: %w", w.Name, err)
	}
	s.stored.Store(key, true)
	return nil
}

// StoreDefinitions stores every registered definition now. The first
// intake of each version does it anyway; a caller that wants it off that
// intake's path (a warm-up, a test counting requests per order) calls this
// first. Safe to call more than once and from several instances.
func (s *Service) StoreDefinitions(ctx context.Context) error {
	for _, w := range s.cfg.Workflows {
		if err := s.storeDefinition(ctx, w); err != nil {
			return err
		}
	}
	return nil
}
