package sas

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseIntake(t *testing.T) {
	t.Parallel()
	rules := IntakeRules{
		Workflows:      func(n string) bool { return n == "order" },
		ReplyToAllowed: func(u string) bool { return strings.HasPrefix(u, "http://sqs.local/000000000000/replies") },
	}
	tests := []struct {
		name, body, field, reason string
	}{
		{"minimal", `{"orderId":"o-1","workflow":"order"}`, "", ""},
		{"full", `{"v":1,"orderId":"A.b_c:d-1","workflow":"order","payload":{"amount":5},"replyTo":"http://sqs.local/000000000000/replies-a","priority":3}`, "", ""},
		{"null payload", `{"orderId":"o","workflow":"order","payload":null}`, "", ""},
		{"not json", `{"orderId":`, "", "not valid JSON"},
		{"empty", ``, "", "empty body"},
		{"array", `[1,2]`, "", "must be"},
		{"trailing", `{"orderId":"o","workflow":"order"} {}`, "", "trailing data"},
		{"unknown field", `{"orderId":"o","workflow":"order","amount":5}`, "", `unknown field "amount"`},
		{"missing orderId", `{"workflow":"order"}`, "orderId", "required"},
		{"orderId too long", `{"orderId":"` + strings.Repeat("a", 129) + `","workflow":"order"}`, "orderId", "1-128"},
		{"orderId bad chars", `{"orderId":"a b","workflow":"order"}`, "orderId", "1-128"},
		{"orderId a number", `{"orderId":12,"workflow":"order"}`, "orderId", `"orderId" must be string`},
		{"missing workflow", `{"orderId":"o"}`, "workflow", "required"},
		{"unknown workflow", `{"orderId":"o","workflow":"refund"}`, "workflow", "not a registered workflow"},
		{"payload not object", `{"orderId":"o","workflow":"order","payload":[1]}`, "payload", "JSON object"},
		{"payload string", `{"orderId":"o","workflow":"order","payload":"x"}`, "payload", "JSON object"},
		{"replyTo not allowed", `{"orderId":"o","workflow":"order","replyTo":"http://evil/q"}`, "replyTo", "not a queue"},
		// Allowed by its prefix, but no queue URL is that long: bounded so
		// that every message echoing it has a known size.
		{"replyTo too long", `{"orderId":"o","workflow":"order","replyTo":"http://sqs.local/000000000000/replies` + strings.Repeat("a", MaxReplyToBytes) + `"}`, "replyTo", "1061 bytes: must be at most 1024 bytes"},
		{"payload at the limit", `{"orderId":"o","workflow":"order","payload":{"x":"` + strings.Repeat("<", MaxPayloadBytes-8) + `"}}`, "", ""},
		{"payload one byte over", `{"orderId":"o","workflow":"order","payload":{"x":"` + strings.Repeat("<", MaxPayloadBytes-7) + `"}}`, "payload", "65537 bytes, over the 65536-byte limit"},
		{"priority out of range", `{"orderId":"o","workflow":"order","priority":99}`, "priority", "between 0 and 9"},
		{"future version", `{"v":2,"orderId":"o","workflow":"order"}`, "v", "unsupported message version 2"},
		{"wrong kind", `{"kind":"agent.reply","orderId":"o","workflow":"order"}`, "kind", "not an intake"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in, err := ParseIntake([]byte(tc.body), rules)
			if tc.reason == "" {
				require.NoError(t, err)
				require.Equal(t, MessageVersion, in.V)
				require.Equal(t, KindIntake, in.Kind)
				return
			}
			require.ErrorIs(t, err, ErrInvalid)
			var ve *ValidationError
			require.ErrorAs(t, err, &ve)
			require.Equal(t, tc.field, ve.Field)
			require.Contains(t, ve.Error(), tc.reason)
		})
	}
}

func TestParseIntakeSalvagesReplyTo(t *testing.T) {
	t.Parallel()
	rules := IntakeRules{Workflows: func(string) bool { return false }, ReplyToAllowed: func(string) bool { return true }}
	in, err := ParseIntake([]byte(`{"orderId":"o","workflow":"nope","replyTo":"http://q"}`), rules)
	require.ErrorIs(t, err, ErrInvalid)
	require.Equal(t, "http://q", in.ReplyTo, "a rejection can still be told to a valid replyTo")
	in, err = ParseIntake([]byte(`{"orderId":"o","workflow":"w","replyTo":"http://evil"}`), IntakeRules{})
	require.ErrorIs(t, err, ErrInvalid)
	require.Empty(t, in.ReplyTo, "never to one that is not allowed")
}

func TestIdempotencyKeyStable(t *testing.T) {
	t.Parallel()
	require.Equal(t, IdempotencyKey("o-1", 2, 0, false), IdempotencyKey("o-1", 2, 0, false))
	require.NotEqual(t, IdempotencyKey("o-1", 2, 0, false), IdempotencyKey("o-1", 2, 0, true))
	require.NotEqual(t, IdempotencyKey("o-1", 2, 0, false), IdempotencyKey("o-1", 3, 0, false))
}

func TestDecodeHeader(t *testing.T) {
	t.Parallel()
	h, err := DecodeHeader([]byte(Encode(AgentReply{V: 1, Kind: KindAgentReply, OrderID: "o", Outcome: OutcomeDone})))
	require.NoError(t, err)
	require.Equal(t, KindAgentReply, h.Kind)
	_, err = DecodeHeader([]byte(`{"v":7}`))
	require.ErrorIs(t, err, ErrInvalid)
	_, err = DecodeHeader([]byte(`nope`))
	require.ErrorIs(t, err, ErrInvalid)
}

// The order fields an agent echoes are additive: a message without them is
// the version-1 message it always was, and one with them still reads as v1.
func TestAgentMessagesEchoFieldsAreOptional(t *testing.T) {
	t.Parallel()
	old := `{"v":1,"kind":"agent.reply","orderId":"o","step":0,"attempt":1,"lockedBy":"s","outcome":"done"}`
	var rep AgentReply
	require.NoError(t, json.Unmarshal([]byte(old), &rep))
	require.Empty(t, rep.Workflow)
	require.Empty(t, rep.ReplyTo)
	require.Empty(t, rep.Payload)
	require.False(t, rep.Compensation)
	require.Empty(t, rep.StepName)
	require.JSONEq(t, old, Encode(rep), "no new keys when there is nothing to echo")

	req := AgentRequest{V: 1, Kind: KindAgentRequest, OrderID: "o", StepName: "charge", Agent: "payments", Attempt: 1, LockedBy: "s"}
	var keys map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(Encode(req)), &keys))
	require.NotContains(t, keys, "workflow")
	require.NotContains(t, keys, "replyTo")
	require.NotContains(t, keys, "timeoutMs", "absent when zero: the agent then runs on CompleteBy")
	req.TimeoutMs = 30_000
	require.Contains(t, Encode(req), `"timeoutMs":30000`)

	rep = AgentReply{
		V: 1, Kind: KindAgentReply, OrderID: "o", Step: 1, Attempt: 2, LockedBy: "s", Outcome: OutcomeFailed,
		Workflow: "order", ReplyTo: "http://q", Payload: json.RawMessage(`{"a":1}`), Compensation: true, StepName: "charge",
	}
	require.JSONEq(t, `{"v":1,"kind":"agent.reply","orderId":"o","step":1,"attempt":2,"lockedBy":"s","outcome":"failed",
		"workflow":"order","replyTo":"http://q","payload":{"a":1},"compensation":true,"stepName":"charge"}`, Encode(rep))
	h, err := DecodeHeader([]byte(Encode(rep)))
	require.NoError(t, err)
	require.Equal(t, MessageVersion, h.V)
}

// A rejection names the field and the rule, and keeps the routing fields a
// caller needs to hear of it, even when the payload is too deep to decode.
func TestParseIntakeNamesTheFieldOfADeepPayload(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":`, MaxNesting+1) + "1" + strings.Repeat("}", MaxNesting+1)
	body := `{"orderId":"o-deep","workflow":"payment","replyTo":"https://sqs.example/q","payload":` + deep + `}`
	in, err := ParseIntake([]byte(body), IntakeRules{})
	var ve *ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "payload", ve.Field)
	require.Contains(t, ve.Reason, "nested deeper than 10000 levels")
	require.NotContains(t, ve.Reason, "not valid JSON")
	require.Equal(t, "o-deep", in.OrderID)
	require.Equal(t, "https://sqs.example/q", in.ReplyTo, "salvaged for the rejection notice (still checked against the allow-list before use)")

	_, err = ParseIntake([]byte(`{"orderId":"o-1","workflow":"payment","priority":"high"}`), IntakeRules{})
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "priority", ve.Field)
}

// Encode writes what JSON needs and nothing more: no HTML escaping (<, >, &
// would grow sixfold and push a payload accepted at intake over the queue's
// limit), no trailing newline.
func TestEncodeDoesNotEscapeHTML(t *testing.T) {
	t.Parallel()
	payload := `{"note":"<b>fish & chips</b>"}`
	got := Encode(AgentRequest{V: 1, Kind: KindAgentRequest, OrderID: "o", Payload: json.RawMessage(payload)})
	require.Contains(t, got, payload)
	require.NotContains(t, got, `\u003c`)
	require.False(t, strings.HasSuffix(got, "\n"), "no trailing newline")

	rep := Encode(AgentReply{V: 1, Kind: KindAgentReply, OrderID: "o", Reason: "HTTP 402: <declined> & done"})
	require.Contains(t, rep, `"reason":"HTTP 402: <declined> & done"`)

	// 50 KiB of '<' (the order of the issue) costs 50 KiB, not 300.
	big := `{"x":"` + strings.Repeat("<", 50<<10) + `"}`
	req := Encode(AgentRequest{V: 1, Kind: KindAgentRequest, OrderID: "o", Payload: json.RawMessage(big)})
	require.Less(t, len(req), len(big)+512)
	var back AgentRequest
	require.NoError(t, json.Unmarshal([]byte(req), &back))
	require.JSONEq(t, big, string(back.Payload))
}

// A replyTo may be given as the queue's ARN, the form the deployment's
// allow-list is written in: it is checked, and kept, as the queue's URL.
func TestParseIntakeReplyToARN(t *testing.T) {
	t.Parallel()
	const url = "https://sqs.eu-west-1.amazonaws.com/111122223333/tenant-a"
	rules := IntakeRules{ReplyToAllowed: func(u string) bool { return u == url || u == "https://sqs.cn-north-1.amazonaws.com.cn/111122223333/q" }}
	in, err := ParseIntake([]byte(`{"orderId":"o","workflow":"w","replyTo":"arn:aws:sqs:eu-west-1:111122223333:tenant-a"}`), rules)
	require.NoError(t, err)
	require.Equal(t, url, in.ReplyTo)
	in, err = ParseIntake([]byte(`{"orderId":"o","workflow":"w","replyTo":"arn:aws-cn:sqs:cn-north-1:111122223333:q"}`), rules)
	require.NoError(t, err)
	require.Equal(t, "https://sqs.cn-north-1.amazonaws.com.cn/111122223333/q", in.ReplyTo)
	_, err = ParseIntake([]byte(`{"orderId":"o","workflow":"w","replyTo":"arn:aws:sqs:eu-west-1:111122223333:tenant-b"}`), rules)
	require.ErrorContains(t, err, `"https://sqs.eu-west-1.amazonaws.com/111122223333/tenant-b" is not a queue this deployment may reply to`)
	for _, bad := range []string{"arn:aws:sns:eu-west-1:111122223333:tenant-a", "arn:aws:sqs:eu-west-1:111122223333", "arn:aws:sqs:eu-west-1:111122223333:a/b"} {
		_, err = ParseIntake([]byte(`{"orderId":"o","workflow":"w","replyTo":"`+bad+`"}`), rules)
		require.ErrorContains(t, err, "is not an SQS queue ARN", bad)
	}
	require.Equal(t, url, ReplyQueueURL("arn:aws:sqs:eu-west-1:111122223333:tenant-a"))
	require.Equal(t, "http://q/1/x", ReplyQueueURL("http://q/1/x"))
}
