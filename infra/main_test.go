package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
)

// The construct's own tests are in sascdk/. These check what this app adds:
// the configuration from context, and a stack that updates in place.

func TestMain(m *testing.M) {
	// Node starts with the first jsii call; CDK_VALIDATION=false and the
	// rest come from the environment (make test-infra), as in sascdk.
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// keptLogicalIDs are the logical ids of the stack as it was before the
// construct (commit c56b93c), every resource but the agent's. Changing one
// would make CloudFormation replace it on update: a new, empty table.
var keptLogicalIDs = []string{
	"AlertTopic2720D535", "AlertTopicPolicy3376BC02", "IntakeDLQNotEmpty3CDC80BF", "IntakeQueue4D8B07A5",
	"IntakeQueueDLQBBA9243E", "IntakeQueueDLQPolicy23BC0B8F", "IntakeQueuePolicy5CB5827F", "OldestStuckStep371210AD",
	"OrdersTable315BB997", "SchedulerCFE73206", "SchedulerDLQNotEmpty5E705C93", "SchedulerErrors2E927777",
	"SchedulerFromIntakeB0493E03", "SchedulerFromSchedulerQueueF4170201", "SchedulerLogs62325BF3",
	"SchedulerQueue12326841", "SchedulerQueueDLQ7878F96A", "SchedulerQueueDLQPolicyAF67CEE2",
	"SchedulerQueuePolicy39C5DFFA", "SchedulerRole59E73443", "SchedulerRoleDefaultPolicy66F774B8",
	"StateTable9728C7E5", "Supervisor34110BDE", "SupervisorErrors189DF41B", "SupervisorEventInvokeConfigE9F927C6",
	"SupervisorLogs4184F5E7", "SupervisorNotRunning275A42DC", "SupervisorRole70619DB1",
	"SupervisorRoleDefaultPolicy03B4AF86", "SupervisorScheduleAllowEventRuleSasStackSupervisorD9C302D0782662A2",
	"SupervisorScheduleFB0F94F5",
	// Added by issue 21 (docs/trust.md), beside the ones above: the control
	// queue, the signing key, the alert key and bus.
	"AlertBus6F0FAD70", "AlertKeyC50D0A1D", "ControlDLQNotEmptyB3033A76",
	"ControlQueue9204A4FA", "ControlQueueDLQE178330E", "ControlQueueDLQPolicy768C19FC", "ControlQueuePolicy706A3D56",
	"SchedulerFromControlQueue1D9F513D", "SigningKeyEEFC2790",
	// Added by issue 17 (docs/console.md): the dashboard and the give-up
	// rate alarm. The orders table keeps its id (its new index is an update).
	"Dashboard9E4231ED", "GiveUpRate42A823B9",
	// Added by issue 17 §3 (docs/observability.md): the owed-too-long alarm.
	"OwedTooLong9E300184",
}

// keptOutputs are the stack's outputs before the construct; sasctl, the
// e2e test and operators' scripts read them by these names.
var keptOutputs = []string{
	"AgentDLQUrl", "AgentFunctionName", "AgentQueueUrl", "AlertTopicArn", "IntakeDLQUrl", "IntakeQueueArn",
	"IntakeQueueUrl", "OrdersTableName", "SchedulerDLQUrl", "SchedulerFunctionName", "SchedulerQueueUrl",
	"StateTableName", "SupervisorFunctionName",
}

func TestStackUpdatesInPlace(t *testing.T) {
	dist := t.TempDir()
	for _, name := range []string{"scheduler", "agent", "supervisor"} {
		dir := filepath.Join(dist, "arm64", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "bootstrap"), []byte(name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	props, err := PropsFromContext(app.Node())
	if err != nil {
		t.Fatal(err)
	}
	props.DistDir = dist
	stack, err := NewStack(app, StackID, props)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(assertions.Template_FromStack(stack, nil).ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resources map[string]any
		Outputs   map[string]any
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for id := range doc.Resources {
		if !strings.HasPrefix(id, "Agentpayments") {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	want := append([]string(nil), keptLogicalIDs...)
	sort.Strings(want)
	if !reflect.DeepEqual(ids, want) {
		t.Errorf("logical ids besides the agent's:\n got %v\nwant %v", ids, keptLogicalIDs)
	}
	for _, o := range keptOutputs {
		if _, ok := doc.Outputs[o]; !ok {
			t.Errorf("output %s is gone (outputs: %v)", o, doc.Outputs)
		}
	}
	// One agent, the built-in one, named as the reference workflows name it.
	if len(props.Agents) != 1 || props.Agents[0].Name != "payments" {
		t.Errorf("agents %+v, want the built-in payments agent", props.Agents)
	}
}
