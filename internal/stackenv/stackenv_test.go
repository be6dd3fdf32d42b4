package stackenv

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/stretchr/testify/require"
)

// testdata/outputs.json is what `make deploy` wrote for infra/main.go's
// stack on MiniStack (one agent, so AgentQueueUrl is there too).
func TestEnvFromTheOutputsFileOfADeploy(t *testing.T) {
	t.Parallel()
	out, err := ReadOutputsFile("testdata/outputs.json", "")
	require.NoError(t, err)
	env, err := Env(out)
	require.NoError(t, err)
	require.Equal(t, []string{
		`SAS_INTAKE_QUEUE_URL=http://localhost:4566/000000000000/SasStack-IntakeQueue4D8B07A5-B1C78AD729295`,
		`SAS_SCHEDULER_QUEUE_URL=http://localhost:4566/000000000000/SasStack-SchedulerQueue12326841-DBBA5EE8C5AFB`,
		`SAS_ORDERS_TABLE=SasStack-OrdersTable315BB997-B78EDF4ACB247`,
		`SAS_STATE_TABLE=SasStack-StateTable9728C7E5-73ECB93F4ED9D`,
		`SAS_ALERT_TOPIC_ARN=arn:aws:sns:us-east-1:000000000000:SasStack-AlertTopic2720D535-BD1C0BF2C27E0`,
		`SAS_AGENT_QUEUES={"payments":{"url":"http://localhost:4566/000000000000/SasStack-AgentpaymentsQueue739E9CC1-6CA36415C26EE"}}`,
		`SAS_AGENT_QUEUE_URL=http://localhost:4566/000000000000/SasStack-AgentpaymentsQueue739E9CC1-6CA36415C26EE`,
	}, env)
}

func TestParseOutputsPicksTheStack(t *testing.T) {
	t.Parallel()
	two := []byte(`{"A": {"IntakeQueueUrl": "a"}, "B": {"IntakeQueueUrl": "b"}}`)
	_, err := ParseOutputs(two, "")
	require.ErrorContains(t, err, "2 stacks (A, B): name one")
	out, err := ParseOutputs(two, "B")
	require.NoError(t, err)
	require.Equal(t, "b", out["IntakeQueueUrl"])
	_, err = ParseOutputs(two, "C")
	require.ErrorContains(t, err, "no outputs for stack C (stacks: A, B)")
	_, err = ParseOutputs([]byte(`[]`), "")
	require.ErrorContains(t, err, "cdk's outputs file")
	_, err = ReadOutputsFile(filepath.Join(t.TempDir(), "none.json"), "")
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestEnvSkipsWhatTheStackLacksAndNeedsTheCore(t *testing.T) {
	t.Parallel()
	env, err := Env(map[string]string{"IntakeQueueUrl": "i", "OrdersTableName": "o", "StateTableName": "s", "AgentDLQs": "{}"})
	require.NoError(t, err)
	require.Equal(t, []string{"SAS_INTAKE_QUEUE_URL=i", "SAS_ORDERS_TABLE=o", "SAS_STATE_TABLE=s"}, env)

	_, err = Env(map[string]string{"IntakeQueueUrl": "i", "Bucket": "b"})
	require.ErrorContains(t, err, "no OrdersTableName, StateTableName among the outputs")
}

// Under a construct id other than "Default" CDK prefixes the path and
// appends a hash; one SAS per stack is found that way, two are an error.
func TestEnvFindsOutputsOfAConstructInYourOwnApp(t *testing.T) {
	t.Parallel()
	env, err := Env(map[string]string{
		"SasIntakeQueueUrl0A1B2C3D": "i", "SasOrdersTableNameDEADBEEF": "o", "SasStateTableName12345678": "s",
		"SasAgentQueues9F8E7D6C": "{}", "OrdersTableNameNotAHash": "x",
	})
	require.NoError(t, err)
	require.Equal(t, []string{"SAS_INTAKE_QUEUE_URL=i", "SAS_ORDERS_TABLE=o", "SAS_STATE_TABLE=s", "SAS_AGENT_QUEUES={}"}, env)

	_, err = Env(map[string]string{
		"IntakeQueueUrl": "i", "StateTableName": "s",
		"OneOrdersTableName0A1B2C3D": "o1", "TwoOrdersTableName4E5F6A7B": "o2",
	})
	require.ErrorContains(t, err, "outputs OneOrdersTableName0A1B2C3D, TwoOrdersTableName4E5F6A7B all look like OrdersTableName")
}

// Every output the construct describes as "SAS_…" is in Vars under that
// name, so a new one cannot be forgotten here.
func TestVarsCoverTheConstructsOutputs(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../infra/sascdk/sascdk.go")
	require.NoError(t, err)
	byOutput := map[string]string{}
	for _, v := range Vars {
		byOutput[v.Output] = v.Name
	}
	// out("<id>", <value>, "<description>"): the description's first word.
	outLine := regexp.MustCompile(`out\("(\w+)", [^"]*"(\w+)`)
	found := 0
	for _, m := range outLine.FindAllStringSubmatch(string(src), -1) {
		if id, word := m[1], m[2]; strings.HasPrefix(word, "SAS_") {
			require.Equal(t, word, byOutput[id], "output %s is described as %s", id, word)
			found++
		}
	}
	require.Equal(t, len(Vars), found, "every variable of Vars is an output described with its name")
}

func TestGetenvOverlays(t *testing.T) {
	t.Parallel()
	get := Getenv([]string{"SAS_STATE_TABLE=s", "EMPTY="}, func(k string) string { return "env:" + k })
	require.Equal(t, "s", get("SAS_STATE_TABLE"))
	require.Equal(t, "", get("EMPTY"))
	require.Equal(t, "env:HOME", get("HOME"))
}

type fakeCFN struct {
	out *cloudformation.DescribeStacksOutput
	err error
	got string
}

func (f *fakeCFN) DescribeStacks(_ context.Context, in *cloudformation.DescribeStacksInput, _ ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error) {
	f.got = aws.ToString(in.StackName)
	return f.out, f.err
}

func TestStackOutputs(t *testing.T) {
	t.Parallel()
	f := &fakeCFN{out: &cloudformation.DescribeStacksOutput{Stacks: []cftypes.Stack{{Outputs: []cftypes.Output{
		{OutputKey: aws.String("IntakeQueueUrl"), OutputValue: aws.String("i"), Description: aws.String("SAS_INTAKE_QUEUE_URL: …")},
		{OutputKey: aws.String("StateTableName"), OutputValue: aws.String("s")},
	}}}}}
	out, err := StackOutputs(context.Background(), f, "SasStack")
	require.NoError(t, err)
	require.Equal(t, "SasStack", f.got)
	require.Equal(t, map[string]string{"IntakeQueueUrl": "i", "StateTableName": "s"}, out)

	_, err = StackOutputs(context.Background(), &fakeCFN{err: errors.New("Stack with id SasStack does not exist")}, "SasStack")
	require.ErrorContains(t, err, "describing stack SasStack: Stack with id SasStack does not exist")
}
