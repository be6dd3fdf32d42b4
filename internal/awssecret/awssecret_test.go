package awssecret_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/awssecret"
	"github.com/sas-go/sas/internal/sas"
)

const (
	secretARN = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:payments-token-AbCdEf"
	paramARN  = "arn:aws:ssm:eu-west-1:111122223333:parameter/sas/payments-token"
)

type fakeSM struct {
	got   []string
	value *string
	err   error
}

func (f *fakeSM) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.got = append(f.got, aws.ToString(in.SecretId))
	if f.err != nil {
		return nil, f.err
	}
	return &secretsmanager.GetSecretValueOutput{SecretString: f.value}, nil
}

type fakeSSM struct {
	got     []*ssm.GetParameterInput
	value   string
	typ     ssmtypes.ParameterType
	missing bool
}

func (f *fakeSSM) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	f.got = append(f.got, in)
	if f.missing {
		return &ssm.GetParameterOutput{}, nil
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Value: aws.String(f.value), Type: f.typ}}, nil
}

func TestParseTellsTheStoresApart(t *testing.T) {
	t.Parallel()
	for arn, want := range map[string]awssecret.Store{
		secretARN: awssecret.SecretsManager,
		paramARN:  awssecret.Parameter,
		"arn:aws-cn:ssm:cn-north-1:111122223333:parameter/x": awssecret.Parameter,
	} {
		got, err := awssecret.Parse(arn)
		require.NoError(t, err, arn)
		require.Equal(t, want, got, arn)
	}
	for _, bad := range []string{
		"", "payments-token", "/sas/payments-token",
		"arn:aws:s3:::bucket/key",
		"arn:aws:secretsmanager:eu-west-1:111122223333:secret:",
		"arn:aws:ssm:eu-west-1:111122223333:document/x",
		"arn:aws:ssm:eu-west-1:111122223333:parameter/",
	} {
		_, err := awssecret.Parse(bad)
		require.ErrorIs(t, err, sas.ErrInvalid, bad)
	}
}

func TestValueReadsASecretsManagerSecret(t *testing.T) {
	t.Parallel()
	sm := &fakeSM{value: aws.String("Bearer s3cr3t\n")}
	v, err := awssecret.Reader{SecretsManager: sm}.Value(t.Context(), secretARN)
	require.NoError(t, err)
	require.Equal(t, "Bearer s3cr3t", v, "surrounding white space trimmed")
	require.Equal(t, []string{secretARN}, sm.got, "asked by ARN")

	for name, f := range map[string]*fakeSM{
		"binary": {},
		"empty":  {value: aws.String("  ")},
		"denied": {err: errors.New("AccessDeniedException")},
	} {
		_, err := awssecret.Reader{SecretsManager: f}.Value(t.Context(), secretARN)
		require.ErrorContains(t, err, secretARN, name)
		if name != "denied" {
			require.ErrorIs(t, err, awssecret.ErrEmpty, name)
		}
	}
}

func TestValueReadsOnlyASecureStringParameter(t *testing.T) {
	t.Parallel()
	p := &fakeSSM{value: "token-1", typ: ssmtypes.ParameterTypeSecureString}
	v, err := awssecret.Reader{SSM: p}.Value(t.Context(), paramARN)
	require.NoError(t, err)
	require.Equal(t, "token-1", v)
	require.Len(t, p.got, 1)
	require.Equal(t, paramARN, aws.ToString(p.got[0].Name))
	require.True(t, aws.ToBool(p.got[0].WithDecryption), "decrypted")

	plain := &fakeSSM{value: "token-1", typ: ssmtypes.ParameterTypeString}
	_, err = awssecret.Reader{SSM: plain}.Value(t.Context(), paramARN)
	require.ErrorIs(t, err, awssecret.ErrEmpty)
	require.ErrorContains(t, err, "not a SecureString")
	require.NotContains(t, err.Error(), "token-1", "the value is never in an error")

	_, err = awssecret.Reader{SSM: &fakeSSM{missing: true}}.Value(t.Context(), paramARN)
	require.ErrorIs(t, err, awssecret.ErrEmpty)
	_, err = awssecret.Reader{}.Value(t.Context(), paramARN)
	require.ErrorContains(t, err, "no SSM client")
}
