package sas_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/sas"
	"github.com/sas-go/sas/internal/testkit/clocktest"
	"github.com/sas-go/sas/internal/testkit/keytest"
)

func TestSignerCoversEveryEchoedField(t *testing.T) {
	t.Parallel()
	s, err := sas.NewSigner([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	base := sas.Signed{OrderID: "o-1", Step: 1, StepName: "charge", Agent: "payments", Attempt: 2, LockedBy: "s-1",
		Workflow: "order", Version: "v1", Payload: json.RawMessage(`{"amount":42}`), ReplyTo: "https://q/1/r", Priority: 3}
	sig := s.Sign(base)
	require.NoError(t, s.Verify(base, sig))

	spaced := base
	spaced.Payload = json.RawMessage("{ \"amount\" : 42 }")
	require.NoError(t, s.Verify(spaced, sig), "the payload is signed compacted, as every message carries it")

	for name, change := range map[string]func(*sas.Signed){
		"order": func(f *sas.Signed) { f.OrderID = "o-2" }, "step": func(f *sas.Signed) { f.Step = 2 },
		"step name": func(f *sas.Signed) { f.StepName = "ship" }, "agent": func(f *sas.Signed) { f.Agent = "x" },
		"attempt": func(f *sas.Signed) { f.Attempt = 3 }, "holder": func(f *sas.Signed) { f.LockedBy = "s-2" },
		"leg": func(f *sas.Signed) { f.Compensation = true }, "workflow": func(f *sas.Signed) { f.Workflow = "payment" },
		"version": func(f *sas.Signed) { f.Version = "v2" }, "payload": func(f *sas.Signed) { f.Payload = json.RawMessage(`{"amount":43}`) },
		"replyTo": func(f *sas.Signed) { f.ReplyTo = "https://q/1/s" }, "priority": func(f *sas.Signed) { f.Priority = 9 },
		"fields run together": func(f *sas.Signed) { f.OrderID, f.StepName = "o-1charge", "" },
	} {
		f := base
		change(&f)
		require.ErrorIs(t, s.Verify(f, sig), sas.ErrBadSignature, name)
	}
	require.ErrorIs(t, s.Verify(base, ""), sas.ErrUnsigned)
	require.ErrorIs(t, s.Verify(base, strings.TrimPrefix(sig, "v2.")), sas.ErrBadSignature)
	other, err := sas.NewSigner([]byte(strings.Repeat("j", 32)))
	require.NoError(t, err)
	require.ErrorIs(t, other.Verify(base, sig), sas.ErrBadSignature, "another key")

	_, err = sas.NewSigner(make([]byte, 31))
	require.ErrorIs(t, err, sas.ErrInvalid)
}

func TestParseSigningKey(t *testing.T) {
	t.Parallel()
	k := sas.NewSigningKey()
	got, err := sas.ParseSigningKey(base64.StdEncoding.EncodeToString(k))
	require.NoError(t, err)
	require.Equal(t, k, got)
	got, err = sas.ParseSigningKey(strings.Repeat("x", 40)) // a generated secret string
	require.NoError(t, err)
	require.Len(t, got, 40)
	_, err = sas.ParseSigningKey("short")
	require.ErrorIs(t, err, sas.ErrInvalid)
}

func TestBoundReason(t *testing.T) {
	t.Parallel()
	require.Equal(t, "short", sas.BoundReason("short"))
	long := strings.Repeat("é", 100_000)
	b := sas.BoundReason(long)
	require.LessOrEqual(t, len(b), sas.MaxReasonBytes)
	require.Contains(t, b, "[cut: 200000 bytes]")
	require.True(t, strings.HasPrefix(long, strings.Split(b, "…")[0]))
}

// A signature names its key; the current key signs, every key of the ring
// verifies; a v1 signature (before key ids) is checked against each key.
func TestSignerKeyIDsAndAcceptedKeys(t *testing.T) {
	t.Parallel()
	oldKey, newKey := []byte(strings.Repeat("o", 32)), []byte(strings.Repeat("n", 32))
	f := sas.Signed{OrderID: "o-1", Step: 0, Agent: "payments", Attempt: 1, LockedBy: "s-1", Workflow: "payment"}
	old, err := sas.NewSigner(oldKey)
	require.NoError(t, err)
	both, err := sas.NewSigner(newKey, oldKey)
	require.NoError(t, err)
	require.Equal(t, []string{sas.KeyID(newKey), sas.KeyID(oldKey)}, both.KeyIDs())

	byOld := old.Sign(f)
	require.True(t, strings.HasPrefix(byOld, "v2."+sas.KeyID(oldKey)+"."), byOld)
	require.NoError(t, both.Verify(f, byOld), "the previous key is still accepted")
	require.ErrorIs(t, old.Verify(f, both.Sign(f)), sas.ErrUnknownKey, "a key the signer does not hold")
	require.ErrorIs(t, old.Verify(f, both.Sign(f)), sas.ErrBadSignature)

	// A v1 signature, as a build before key ids wrote it, is the same MAC.
	v1 := "v1." + strings.SplitN(byOld, ".", 3)[2]
	require.NoError(t, old.Verify(f, v1))
	require.NoError(t, both.Verify(f, v1), "checked against each key held")
	newOnly, err := sas.NewSigner(newKey)
	require.NoError(t, err)
	require.ErrorIs(t, newOnly.Verify(f, v1), sas.ErrBadSignature, "a v1 signature by a key rotated out")
	// A signature naming one key with another's MAC does not pass.
	forged := "v2." + sas.KeyID(newKey) + "." + strings.SplitN(byOld, ".", 3)[2]
	require.ErrorIs(t, both.Verify(f, forged), sas.ErrBadSignature)

	_, err = sas.NewSigner(newKey, make([]byte, 8))
	require.ErrorIs(t, err, sas.ErrInvalid, "an accepted key is checked too")
}

// A sourced signer reads its keys again when they are older than its
// maximum age: a rotation reaches it, and so does a revocation; a failed
// read keeps the keys it has and is tried again later, not on every call.
func TestSourcedSignerRereadsItsKeys(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k1, k2 := []byte(strings.Repeat("1", 32)), []byte(strings.Repeat("2", 32))
	secret := keytest.New(k1)
	clock := clocktest.New(time.UnixMilli(1_800_000_000_000))
	s, err := sas.NewSourcedSigner(ctx, secret.Read, clock, time.Minute)
	require.NoError(t, err)
	f := sas.Signed{OrderID: "o-1", Agent: "a", Attempt: 1}
	signedBy1 := s.Sign(f)

	secret.Rotate(k2)
	clock.Advance(time.Minute - time.Millisecond)
	require.NoError(t, s.Refresh(ctx))
	require.Equal(t, []string{sas.KeyID(k1)}, s.KeyIDs(), "fresh keys are not read again")
	require.Equal(t, 1, secret.Reads())
	clock.Advance(time.Millisecond)
	require.NoError(t, s.Refresh(ctx))
	require.Equal(t, []string{sas.KeyID(k2), sas.KeyID(k1)}, s.KeyIDs(), "read again at its maximum age")
	require.NoError(t, s.Verify(f, signedBy1))

	secret.RemovePrevious()
	clock.Advance(time.Minute)
	require.NoError(t, s.Refresh(ctx))
	require.ErrorIs(t, s.Verify(f, signedBy1), sas.ErrUnknownKey, "a revoked key is refused within the maximum age")

	secret.FailReads(errors.New("secrets manager unavailable"))
	clock.Advance(time.Minute)
	require.Error(t, s.Refresh(ctx))
	reads := secret.Reads()
	require.NoError(t, s.Refresh(ctx), "not tried again at once")
	require.Equal(t, reads, secret.Reads())
	require.Equal(t, []string{sas.KeyID(k2)}, s.KeyIDs(), "the keys read before are kept")
	require.NoError(t, s.Verify(f, s.Sign(f)))
	secret.FailReads(nil)
	clock.Advance(30 * time.Second)
	require.NoError(t, s.Refresh(ctx))
	require.Equal(t, reads+1, secret.Reads(), "tried again after keyRetry")

	_, err = sas.NewSourcedSigner(ctx, func(context.Context) (sas.KeyRing, error) { return sas.KeyRing{}, errors.New("no") }, clock, 0)
	require.Error(t, err, "a signer without keys is not made")
}

// sample is a value of type t that is not its zero value, different for
// each seed.
func sample(t reflect.Type, seed int) reflect.Value {
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("x%d", seed))
	case reflect.Int, reflect.Int64:
		v.SetInt(int64(seed + 1))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Slice: // json.RawMessage
		v.SetBytes([]byte(fmt.Sprintf(`{"n":%d}`, seed)))
	default:
		panic("no sample of " + t.String())
	}
	return v
}

// The signed fields are listed once (sas.Signed): a request and a reply
// fill in every one of them, each from its field of the same name, and the
// signature covers each (issue 29, N1: a requeue's check once rebuilt them
// by hand and left out the generation). A field added to Signed and
// forgotten by one side fails here.
func TestEverySignedFieldIsFilledAndCovered(t *testing.T) {
	t.Parallel()
	s, err := sas.NewSigner([]byte(strings.Repeat("k", 32)))
	require.NoError(t, err)
	st := reflect.TypeOf(sas.Signed{})
	for i := range st.NumField() {
		f := st.Field(i)
		var req sas.AgentRequest
		var rep sas.AgentReply
		for _, m := range []reflect.Value{reflect.ValueOf(&req).Elem(), reflect.ValueOf(&rep).Elem()} {
			mf := m.FieldByName(f.Name)
			require.True(t, mf.IsValid(), "%s has no field %s, which the signature covers", m.Type(), f.Name)
			require.Equal(t, f.Type, mf.Type(), "%s.%s", m.Type(), f.Name)
			mf.Set(sample(f.Type, i))
		}
		for what, got := range map[string]sas.Signed{"request": req.Signed(), "reply": rep.Signed()} {
			require.Equal(t, sample(f.Type, i).Interface(), reflect.ValueOf(got).Field(i).Interface(), "the %s's Signed() leaves out %s", what, f.Name)
		}
		require.ErrorIs(t, s.Verify(sas.Signed{}, s.Sign(req.Signed())), sas.ErrBadSignature, "the signature does not cover %s", f.Name)
	}
}
