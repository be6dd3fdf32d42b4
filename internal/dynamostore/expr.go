package dynamostore

import (
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sas-go/sas/internal/sas"
)

// updateExpr builds one conditional UpdateItem. Every attribute goes through
// a placeholder so reserved words never bite.
type updateExpr struct {
	sets, removes []string
	condition     string
	names         map[string]string
	values        map[string]av
	n             *int
}

func newUpdate() updateExpr {
	return updateExpr{names: map[string]string{}, values: map[string]av{}, n: new(int)}
}

// cond adds a condition (AND); pairs are placeholder, value (string names
// for #, attribute values for :). Guards (guards.go) are its only callers.
func (u *updateExpr) cond(expr string, pairs ...any) {
	if u.condition == "" {
		u.condition = expr
	} else {
		u.condition = "(" + u.condition + ") AND (" + expr + ")"
	}
	for i := 0; i+1 < len(pairs); i += 2 {
		k := pairs[i].(string)
		if strings.HasPrefix(k, "#") {
			u.names[k] = pairs[i+1].(string)
		} else {
			u.values[k] = pairs[i+1].(av)
		}
	}
}

func (u *updateExpr) name(attr string) string {
	k := "#" + attr
	u.names[k] = attr
	return k
}

func (u *updateExpr) value(v av) string {
	*u.n++
	k := ":v" + strconv.Itoa(*u.n)
	u.values[k] = v
	return k
}

func (u *updateExpr) set(attr string, v av) {
	u.sets = append(u.sets, u.name(attr)+" = "+u.value(v))
}

func (u *updateExpr) add(attr string, by int) {
	u.sets = append(u.sets, u.name(attr)+" = "+u.name(attr)+" + "+u.value(ni(by)))
}

func (u *updateExpr) remove(attrs ...string) {
	for _, a := range attrs {
		u.removes = append(u.removes, u.name(a))
	}
}

// touch stamps UpdatedAt and appends one history entry.
func (u *updateExpr) touch(now time.Time, h sas.HistoryEntry) {
	u.set(attrUpdatedAt, ms(now))
	u.record(h)
}

// record appends one history entry.
func (u *updateExpr) record(h sas.HistoryEntry) {
	hist := u.name(attrHistory)
	u.sets = append(u.sets, hist+" = list_append("+hist+", "+u.value(&types.AttributeValueMemberL{Value: []av{historyEntry(h)}})+")")
}

func (u updateExpr) expression() string {
	var b strings.Builder
	if len(u.sets) > 0 {
		b.WriteString("SET " + strings.Join(u.sets, ", "))
	}
	if len(u.removes) > 0 {
		b.WriteString(" REMOVE " + strings.Join(u.removes, ", "))
	}
	return strings.TrimSpace(b.String())
}

func (u updateExpr) input(table string, k sas.StepKey) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       stepKey(k),
		UpdateExpression:          aws.String(u.expression()),
		ConditionExpression:       aws.String(u.condition),
		ExpressionAttributeNames:  u.names,
		ExpressionAttributeValues: u.values,
	}
}

func asTransactUpdate(in *dynamodb.UpdateItemInput) *types.Update {
	return &types.Update{
		TableName:                           in.TableName,
		Key:                                 in.Key,
		UpdateExpression:                    in.UpdateExpression,
		ConditionExpression:                 in.ConditionExpression,
		ExpressionAttributeNames:            in.ExpressionAttributeNames,
		ExpressionAttributeValues:           in.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// cursorKey is one shard's position in a ListByState page.
type cursorKey struct {
	At    int64  `json:"t"`
	Order string `json:"o"`
	Step  int    `json:"s"`
}

func (c cursorKey) key(pk string) map[string]av {
	return map[string]av{attrIdxPK: s(pk), attrIdxSK: n(c.At), attrOrderID: s(c.Order), attrStep: ni(c.Step)}
}

func encodeCursor(m map[int]cursorKey) string {
	if len(m) == 0 {
		return ""
	}
	b, _ := json.Marshal(m) // ints and strings only
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(c string) (map[int]cursorKey, error) {
	m := map[int]cursorKey{}
	if c == "" {
		return m, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return nil, &sas.ValidationError{Field: "cursor", Reason: "not a cursor from a previous page"}
	}
	return m, nil
}
