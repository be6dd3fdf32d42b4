// Package awsenv builds the AWS SDK configuration from the environment, the
// same way locally, in tests and in Lambda. Endpoints come from the SDK's own
// AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_<SERVICE> variables.
package awsenv

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Emulated reports whether any AWS endpoint is overridden (an emulator or LocalStack).
func Emulated() bool {
	for _, k := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}

// Load returns the SDK configuration. Against an emulator it fills in a
// region and dummy credentials when none are set, and turns off response
// checksum validation (DynamoDB Local's error responses fail it, docs/pattern.md §7).
func Load(ctx context.Context, opts ...func(*config.LoadOptions) error) (aws.Config, error) {
	if Emulated() {
		if os.Getenv("AWS_REGION") == "" && os.Getenv("AWS_DEFAULT_REGION") == "" {
			opts = append(opts, config.WithRegion("us-east-1"))
		}
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" && os.Getenv("AWS_PROFILE") == "" {
			opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")))
		}
		opts = append(opts, config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading AWS configuration: %w", err)
	}
	return cfg, nil
}

// DynamoDBOptions turns off the DynamoDB client's own CRC32 response check
// against an emulator: DynamoDB Local's error responses fail it and the SDK
// logs a warning for each. Real DynamoDB keeps the check.
func DynamoDBOptions(o *dynamodb.Options) {
	if Emulated() {
		o.DisableValidateResponseChecksum = true
	}
}
