package workflow_test

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/workflow"
)

// The published schema accepts the example file and refuses what it can say
// is wrong; Parse refuses all of that and more (badCases).
func TestSchemaAgreesWithParse(t *testing.T) {
	t.Parallel()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(workflow.Schema()))
	require.NoError(t, err)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource("schema.json", doc))
	sch, err := c.Compile("schema.json")
	require.NoError(t, err)

	good, err := os.ReadFile("testdata/travel.json")
	require.NoError(t, err)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(good))
	require.NoError(t, err)
	require.NoError(t, sch.Validate(v), "the schema accepts the example")

	onDisk, err := os.ReadFile("schema.json")
	require.NoError(t, err)
	require.True(t, json.Valid(onDisk))
	require.Equal(t, onDisk, workflow.Schema(), "Schema returns the published file")

	for _, tc := range badCases {
		if !tc.schemaToo {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(tc.body)))
			if err != nil {
				return // not JSON: nothing for a schema to say
			}
			require.Error(t, sch.Validate(v), "the schema accepts %s", tc.body)
		})
	}
}
