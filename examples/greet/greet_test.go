package greet_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/examples/greet"
	"github.com/sas-go/sas/sastest"
	"github.com/sas-go/sas/workflow"
)

func TestGreet(t *testing.T) {
	demo := greet.NewDemo()
	env := sastest.New(t, greet.Workflows(), greet.Shop(demo), greet.Mail(demo))

	res := env.Run("greet", "g-1", greet.Order{To: "Ada", Gift: "book"})
	require.Equal(t, sastest.StatusProcessed, res.Status)

	res = env.Run("greet", "g-2", greet.Order{Gift: "book"}) // no address
	require.Equal(t, sastest.StatusCompensated, res.Status)
	require.Equal(t, []string{"gift"}, res.Undone) // the card has no undo

	env.Fail("card", 1, errors.New("mail server unavailable")) // transient, first attempt only
	res = env.Run("greet", "g-3", greet.Order{To: "Alan", Gift: "pen"})
	require.Equal(t, sastest.StatusProcessed, res.Status) // retried as a deployment retries it
}

// workflows.json is the Go definition, written out by
// `sasctl workflows write github.com/sas-go/sas/examples/greet Workflows`.
func TestWorkflowsFile(t *testing.T) {
	fromFile, err := workflow.Load("workflows.json")
	require.NoError(t, err)
	require.Equal(t, greet.Workflows(), fromFile)
}
