// Package awssecret reads a secret's value from where a deployment keeps
// it: a Secrets Manager secret or an SSM SecureString parameter, named by
// its ARN. The ARN says which service holds it, so one setting (such as
// SAS_AGENT_AUTH_SECRET) can name either, and the role's grant names the
// same ARN.
package awssecret

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	"github.com/sas-go/sas/internal/sas"
)

// Store is the service an ARN names.
type Store int

const (
	// SecretsManager: arn:<partition>:secretsmanager:<region>:<account>:secret:<name>.
	SecretsManager Store = iota + 1
	// Parameter: an SSM parameter, arn:<partition>:ssm:<region>:<account>:parameter/<name>.
	Parameter
)

func (s Store) String() string {
	switch s {
	case SecretsManager:
		return "Secrets Manager secret"
	case Parameter:
		return "SSM parameter"
	}
	return "unknown store"
}

// Parse says which store arn names, or why it names none.
func Parse(arn string) (Store, error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[3] == "" || parts[4] == "" {
		return 0, &sas.ValidationError{Field: "secret", Reason: fmt.Sprintf("%q is not an ARN: want arn:<partition>:secretsmanager:<region>:<account>:secret:<name> or arn:<partition>:ssm:<region>:<account>:parameter/<name>", arn)}
	}
	switch {
	case parts[2] == "secretsmanager" && strings.HasPrefix(parts[5], "secret:") && len(parts[5]) > len("secret:"):
		return SecretsManager, nil
	case parts[2] == "ssm" && strings.HasPrefix(parts[5], "parameter/") && len(parts[5]) > len("parameter/"):
		return Parameter, nil
	}
	return 0, &sas.ValidationError{Field: "secret", Reason: fmt.Sprintf("%q names neither a Secrets Manager secret nor an SSM parameter", arn)}
}

// SecretsManagerAPI is the one call Reader makes to Secrets Manager.
type SecretsManagerAPI interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// SSMAPI is the one call Reader makes to SSM.
type SSMAPI interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

var (
	_ SecretsManagerAPI = (*secretsmanager.Client)(nil)
	_ SSMAPI            = (*ssm.Client)(nil)
)

// Reader reads secrets. Either client may be nil when no secret of its
// store is read.
type Reader struct {
	SecretsManager SecretsManagerAPI
	SSM            SSMAPI
}

// New returns a Reader with both services' clients from cfg.
func New(cfg aws.Config) Reader {
	return Reader{SecretsManager: secretsmanager.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg)}
}

// ErrEmpty is a secret with no usable value: binary, empty, or a
// parameter that is not a SecureString.
var ErrEmpty = errors.New("no usable secret value")

// Value reads the secret arn names: a Secrets Manager secret's string, or
// an SSM SecureString parameter's decrypted value, with surrounding white
// space trimmed. A plain String parameter is refused: a secret kept there
// is stored unencrypted. Errors name the ARN, never the value.
func (r Reader) Value(ctx context.Context, arn string) (string, error) {
	store, err := Parse(arn)
	if err != nil {
		return "", err
	}
	var v string
	switch store {
	case SecretsManager:
		if r.SecretsManager == nil {
			return "", fmt.Errorf("reading %s %s: no Secrets Manager client", store, arn)
		}
		out, err := r.SecretsManager.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(arn)})
		if err != nil {
			return "", fmt.Errorf("reading %s %s: %w", store, arn, err)
		}
		if out.SecretString == nil {
			return "", fmt.Errorf("reading %s %s: it has no string value: %w", store, arn, ErrEmpty)
		}
		v = *out.SecretString
	case Parameter:
		if r.SSM == nil {
			return "", fmt.Errorf("reading %s %s: no SSM client", store, arn)
		}
		out, err := r.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(arn), WithDecryption: aws.Bool(true)})
		if err != nil {
			return "", fmt.Errorf("reading %s %s: %w", store, arn, err)
		}
		if out.Parameter == nil || out.Parameter.Value == nil {
			return "", fmt.Errorf("reading %s %s: no value: %w", store, arn, ErrEmpty)
		}
		if out.Parameter.Type != ssmtypes.ParameterTypeSecureString {
			return "", fmt.Errorf("reading %s %s: it is a %s, not a SecureString (a secret must be stored encrypted): %w", store, arn, out.Parameter.Type, ErrEmpty)
		}
		v = *out.Parameter.Value
	}
	if v = strings.TrimSpace(v); v == "" {
		return "", fmt.Errorf("reading %s %s: it is empty: %w", store, arn, ErrEmpty)
	}
	return v, nil
}
