package fromaws

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	smtypes "github.com/aws/aws-sdk-go-v2/service/secretsmanager/types"
	"github.com/stretchr/testify/require"

	"github.com/sas-go/sas/internal/config"
	"github.com/sas-go/sas/internal/sas"
)

// stages is a secret's versions by stage, answering as Secrets Manager
// does: ResourceNotFoundException for a stage no version has.
type stages map[string]string

func (s stages) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	if v, ok := s[aws.ToString(in.VersionStage)]; ok {
		return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(v)}, nil
	}
	return nil, &smtypes.ResourceNotFoundException{Message: aws.String("Secrets Manager can't find the specified secret value for staging label")}
}

// The scheduler signs with AWSCURRENT and accepts AWSPENDING and
// AWSPREVIOUS while they exist (docs/trust.md, "The signing key").
func TestSigningKeysReadTheSecretsStages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cur, pend, prev := strings.Repeat("c", 64), strings.Repeat("p", 64), strings.Repeat("q", 64)
	key := func(s string) []byte {
		k, err := sas.ParseSigningKey(s)
		require.NoError(t, err)
		return k
	}

	ring, err := secretKeys(stages{stageCurrent: cur}, "arn:secret")(ctx)
	require.NoError(t, err)
	require.Equal(t, sas.KeyRing{Current: key(cur)}, ring, "a secret never rotated")

	ring, err = secretKeys(stages{stageCurrent: cur, stagePending: pend, stagePrevious: prev}, "arn:secret")(ctx)
	require.NoError(t, err)
	require.Equal(t, key(cur), ring.Current)
	require.Equal(t, [][]byte{key(pend), key(prev)}, ring.Accepted)

	_, err = secretKeys(stages{stagePending: pend}, "arn:secret")(ctx)
	var missing *smtypes.ResourceNotFoundException
	require.True(t, errors.As(err, &missing), "no current key is an error: %v", err)
	_, err = secretKeys(stages{stageCurrent: cur, stagePrevious: "short"}, "arn:secret")(ctx)
	require.ErrorIs(t, err, sas.ErrInvalid, "an accepted key that is not a key is an error, not skipped")

	src, err := SigningKeys(aws.Config{}, config.Config{SigningKey: strings.Repeat("l", 44)})
	require.NoError(t, err)
	ring, err = src(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, ring.Current)
	require.Empty(t, ring.Accepted, "a local run's key never changes")
	_, err = SigningKeys(aws.Config{}, config.Config{})
	require.ErrorIs(t, err, ErrNoSigningKey)
}
