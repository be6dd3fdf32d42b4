package dynamostore

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sas-go/sas/internal/awsenv"
	"github.com/sas-go/sas/internal/config"
)

// FromConfig builds the store a deployment uses: a DynamoDB client from
// awsCfg, with the emulator settings of awsenv.DynamoDBOptions, on the
// tables and shard count cfg names.
func FromConfig(awsCfg aws.Config, cfg config.Config) (*Store, error) {
	return New(dynamodb.NewFromConfig(awsCfg, awsenv.DynamoDBOptions), Config{
		OrdersTable: cfg.OrdersTable, StateTable: cfg.StateTable, Shards: cfg.IndexShards,
	})
}
